// Package node knows the machine the agent runs on (capacity, addresses,
// OS facts, what oom_score_adj values it allows) and builds the node's
// corev1.Node status from them and from the runtime's conditions.
package node

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"nodeagent/agent/config"
	"nodeagent/cgroups"
	"nodeagent/eviction"
	"nodeagent/internal/qos"
)

// Machine holds the facts read from the host once at start.
type Machine struct {
	CPUs          int
	MemoryBytes   int64
	SwapBytes     int64 // SwapTotal: the swap the host has on
	PIDMax        int64
	KernelVersion string
	OSImage       string
	MachineID     string
	SystemUUID    string
	BootID        string
	BootTime      time.Time
	// DefaultInterface carries the default route.
	DefaultInterface string
	// EphemeralStorageBytes is the size of the filesystem holding the
	// agent's root directory (pod volumes, logs): the kubelet's nodefs.
	EphemeralStorageBytes int64
}

// ReadMachine reads cpu count, memory, pid limit and OS facts, and the
// size of the filesystem holding rootDir.
func ReadMachine(rootDir string) (Machine, error) {
	m := Machine{CPUs: runtime.NumCPU()}
	mem, err := meminfo("/proc/meminfo", "MemTotal")
	if err != nil {
		return m, err
	}
	m.MemoryBytes = mem
	m.SwapBytes, _ = meminfo("/proc/meminfo", "SwapTotal") // absent: no swap
	m.PIDMax = readInt("/proc/sys/kernel/pid_max")
	if threads := readInt("/proc/sys/kernel/threads-max"); threads > 0 && threads < m.PIDMax {
		m.PIDMax = threads
	}
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		m.KernelVersion = unix.ByteSliceToString(uts.Release[:])
	}
	m.OSImage = osImage("/etc/os-release")
	m.MachineID = readString("/etc/machine-id")
	m.SystemUUID = strings.ToLower(readString("/sys/class/dmi/id/product_uuid"))
	var fs unix.Statfs_t
	if unix.Statfs(rootDir, &fs) == nil {
		m.EphemeralStorageBytes = int64(fs.Blocks) * fs.Bsize
	}
	m.BootID = readString("/proc/sys/kernel/random/boot_id")
	m.BootTime = bootTime("/proc/stat")
	m.DefaultInterface = defaultRouteInterface("/proc/net/route")
	return m, nil
}

// meminfo reads one of /proc/meminfo's fields, in bytes.
func meminfo(path, field string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse %s: %w", path, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in %s", field, path)
}

// bootTime is the kernel's btime in /proc/stat.
func bootTime(path string) time.Time {
	for _, line := range strings.Split(readString(path), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			if secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return time.Unix(secs, 0)
			}
		}
	}
	return time.Time{}
}

func readString(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

func readInt(path string) int64 {
	n, _ := strconv.ParseInt(readString(path), 10, 64)
	return n
}

func osImage(path string) string {
	for _, line := range strings.Split(readString(path), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "Linux"
}

// Capacity is the node's capacity as the kubelet reports it, plus the
// internal "pid" entry used for the kubepods pids limit.
func (m Machine) Capacity(maxPods int32) corev1.ResourceList {
	c := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(m.CPUs), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(m.MemoryBytes, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
		cgroups.PIDResource:   *resource.NewQuantity(m.PIDMax, resource.DecimalSI),
	}
	if m.EphemeralStorageBytes > 0 {
		c[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(m.EphemeralStorageBytes, resource.BinarySI)
	}
	return c
}

// Allocatable is capacity minus systemReserved, kubeReserved and the hard
// eviction thresholds for memory and nodefs (what the scheduler, and
// admission, may hand out), never below zero.
func Allocatable(capacity corev1.ResourceList, cfg *config.Config) corev1.ResourceList {
	alloc := capacity.DeepCopy()
	sub := func(name corev1.ResourceName, q resource.Quantity) {
		if v, ok := alloc[name]; ok {
			v.Sub(q)
			if v.Sign() < 0 {
				v.Set(0)
			}
			alloc[name] = v
		}
	}
	for _, r := range cfg.Reserved() {
		for name, q := range r {
			sub(name, q)
		}
	}
	thresholds, _ := cfg.EvictionThresholds() // validated at load
	for _, th := range thresholds {
		if th.Hard && th.Signal == eviction.MemoryAvailable {
			mem := capacity[corev1.ResourceMemory]
			sub(corev1.ResourceMemory, *resource.NewQuantity(th.Value.Of(mem.Value()), resource.BinarySI))
		}
		if th.Hard && th.Signal == eviction.NodeFsAvailable {
			if disk, ok := capacity[corev1.ResourceEphemeralStorage]; ok {
				sub(corev1.ResourceEphemeralStorage, *resource.NewQuantity(th.Value.Of(disk.Value()), resource.BinarySI))
			}
		}
	}
	delete(alloc, cgroups.PIDResource)
	return alloc
}

// IP is the node's address: the configured address when it is a specific
// one, else the first IPv4 address of the interface holding the default
// route, else loopback.
func IP(configured string) string {
	if ip := net.ParseIP(configured); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		return ip.String()
	}
	if iface := defaultRouteInterface("/proc/net/route"); iface != "" {
		if ifc, err := net.InterfaceByName(iface); err == nil {
			if addrs, err := ifc.Addrs(); err == nil {
				for _, a := range addrs {
					if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
						return ipn.IP.String()
					}
				}
			}
		}
	}
	return "127.0.0.1"
}

func defaultRouteInterface(path string) string {
	for _, line := range strings.Split(readString(path), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 2 && f[1] == "00000000" {
			return f[0]
		}
	}
	return ""
}

// OOMScoreRange is what this host lets a process set: without
// CAP_SYS_RESOURCE nothing below the agent's own current score (which the
// runtime, started the same way, shares).
func OOMScoreRange() qos.OOMScoreRange {
	if hasCapSysResource() {
		return qos.Unrestricted
	}
	cur, err := strconv.Atoi(readString("/proc/self/oom_score_adj"))
	if err != nil {
		cur = 0
	}
	return qos.OOMScoreRange{Min: cur}
}

func hasCapSysResource() bool {
	const capSysResource = 24
	for _, line := range strings.Split(readString("/proc/self/status"), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			bits, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && bits&(1<<capSysResource) != 0
		}
	}
	return false
}

// SetOwnOOMScoreAdj gives the agent the kubelet's own score (-999) so the
// kernel kills pods before it; on hosts that refuse, it says so.
func SetOwnOOMScoreAdj(adj int) error {
	return os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(adj)), 0o644)
}
