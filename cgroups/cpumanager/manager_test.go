package cpumanager

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"
)

func container(name, cpu string) corev1.Container {
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")}
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: l, Limits: l}}
}

func guaranteed(uid string, cs ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: cs}, ObjectMeta: metaUID(uid)}
}

func newManager(t *testing.T, topo Topology, reserved string, strict bool, log io.Writer) (*Manager, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cpu_manager_state")
	return openManager(t, topo, reserved, strict, path, log), path
}

func openManager(t *testing.T, topo Topology, reserved string, strict bool, path string, log io.Writer) *Manager {
	t.Helper()
	if log == nil {
		log = io.Discard
	}
	m, err := New(Options{Topology: topo, Reserved: mustParse(t, reserved), StrictReservation: strict, StateFile: path, Log: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTwoCPUsOneReservedOneExclusive(t *testing.T) {
	m, _ := newManager(t, Uniform(1, 2, 1), "0", false, nil)
	changes := 0
	m.OnChange(func() { changes++ })
	pod := guaranteed("a", container("app", "1"), container("helper", "500m"))
	if err := m.Allocate(pod, nil); err != nil {
		t.Fatal(err)
	}
	if set, ok := m.CPUs("a", "app"); !ok || set.String() != "1" {
		t.Fatalf("app runs on %s (exclusive %v), want 1 exclusively", set, ok)
	}
	if set, ok := m.CPUs("a", "helper"); ok || set.String() != "0" {
		t.Fatalf("a fractional container runs on %s (exclusive %v), want the shared pool 0", set, ok)
	}
	if changes != 1 || m.Shared().String() != "0" {
		t.Fatalf("shared pool %s after %d changes, want 0 after 1", m.Shared(), changes)
	}
	err := m.Allocate(guaranteed("b", container("app", "1")), nil)
	if err == nil || !strings.Contains(err.Error(), "requested=1, available=0") {
		t.Fatalf("a second whole CPU: err = %v, want not enough cpus", err)
	}
	m.Release("a")
	if m.Shared().String() != "0-1" || m.HasExclusive("a") || changes != 2 {
		t.Fatalf("after release: shared %s, pod holds CPUs %v, %d changes", m.Shared(), m.HasExclusive("a"), changes)
	}
}

func TestStrictReservationKeepsTheSharedPoolOffReservedCPUs(t *testing.T) {
	m, _ := newManager(t, Uniform(1, 4, 1), "0", true, nil)
	if m.Shared().String() != "1-3" {
		t.Fatalf("shared %s, want 1-3", m.Shared())
	}
	if err := m.Allocate(guaranteed("a", container("app", "2")), nil); err != nil {
		t.Fatal(err)
	}
	if set, _ := m.CPUs("a", "app"); set.String() != "1-2" || m.Shared().String() != "3" {
		t.Fatalf("app on %s, shared %s; want 1-2 and 3", set, m.Shared())
	}
}

func TestOnlyWholeCPUsOfGuaranteedPodsAreExclusive(t *testing.T) {
	burstable := guaranteed("x", container("app", "1"))
	burstable.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	podLevel := guaranteed("y", container("app", "1"))
	podLevel.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want int
	}{
		{guaranteed("g", container("app", "2")), 2},
		{guaranteed("f", container("app", "1500m")), 0},
		{burstable, 0},
		{podLevel, 0},
	} {
		if got := ExclusiveCPUs(tc.pod, &tc.pod.Spec.Containers[0]); got != tc.want {
			t.Errorf("pod %s: %d exclusive CPUs, want %d", tc.pod.UID, got, tc.want)
		}
	}
}

func TestInitContainerCPUsAreReusedButSidecarsKeepTheirs(t *testing.T) {
	m, _ := newManager(t, Uniform(1, 4, 1), "0", false, nil)
	always := corev1.ContainerRestartPolicyAlways
	pod := guaranteed("a", container("app", "1"))
	pod.Spec.InitContainers = []corev1.Container{container("init", "2"), container("sidecar", "1")}
	pod.Spec.InitContainers[1].RestartPolicy = &always
	if err := m.Allocate(pod, nil); err != nil {
		t.Fatal(err)
	}
	a := m.Assigned("a")
	if !a["sidecar"].Intersection(a["app"]).IsEmpty() {
		t.Fatalf("sidecar %s and app %s share CPUs", a["sidecar"], a["app"])
	}
	if !a["sidecar"].IsSubsetOf(a["init"]) || !a["app"].IsSubsetOf(a["init"]) {
		t.Fatalf("init %s, sidecar %s, app %s: the later containers should reuse the init container's CPUs", a["init"], a["sidecar"], a["app"])
	}
	if m.Shared().String() != "0,3" {
		t.Fatalf("shared %s, want 0,3", m.Shared())
	}
}

func TestAssignmentsSurviveARestartAndACorruptFileIsDropped(t *testing.T) {
	m, path := newManager(t, Uniform(1, 4, 1), "0", false, nil)
	if err := m.Allocate(guaranteed("a", container("app", "2")), nil); err != nil {
		t.Fatal(err)
	}
	again := openManager(t, Uniform(1, 4, 1), "0", false, path, nil)
	if set, ok := again.CPUs("a", "app"); !ok || set.String() != "1-2" {
		t.Fatalf("after a restart app runs on %s (exclusive %v), want 1-2", set, ok)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"policyName":"static"`, `"defaultCpuSet":"0,3"`, `"entries":{"a":{"app":"1-2"}}`} {
		if !bytes.Contains(b, []byte(field)) {
			t.Errorf("checkpoint %s lacks %s", b, field)
		}
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(`\"1-2\"`), []byte(`\"1-3\"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	torn := openManager(t, Uniform(1, 4, 1), "0", false, path, &log)
	if torn.HasExclusive("a") || !strings.Contains(log.String(), path) || !strings.Contains(log.String(), "checksum") {
		t.Fatalf("an edited checkpoint was taken, or not logged with its path: %s", log.String())
	}
	if _, err := os.Stat(path + ".corrupt"); err != nil {
		t.Errorf("the corrupt checkpoint was not kept aside: %v", err)
	}
	// The runtime's view puts the pod back on the CPUs it runs on.
	prefer := func(string) cpuset.CPUSet { return cpuset.New(2, 3) }
	if err := torn.Allocate(guaranteed("a", container("app", "2")), prefer); err != nil {
		t.Fatal(err)
	}
	if set, _ := torn.CPUs("a", "app"); set.String() != "2-3" {
		t.Fatalf("rebuilt on %s, want the CPUs the container runs on, 2-3", set)
	}
}

func TestCheckpointEntriesOnReservedCPUsAreDropped(t *testing.T) {
	m, path := newManager(t, Uniform(1, 4, 1), "0", false, nil)
	if err := m.Allocate(guaranteed("a", container("app", "1")), nil); err != nil {
		t.Fatal(err)
	}
	// Now CPU 1 is reserved too.
	var log bytes.Buffer
	again := openManager(t, Uniform(1, 4, 1), "0-1", false, path, &log)
	if again.HasExclusive("a") || !strings.Contains(log.String(), "dropped") {
		t.Fatalf("an assignment on a reserved CPU was kept: %s", log.String())
	}
}

func TestNewRefusesReservationsThatCannotWork(t *testing.T) {
	for _, reserved := range []string{"", "0-1", "0,5"} {
		set, _ := cpuset.Parse(reserved)
		_, err := New(Options{Topology: Uniform(1, 2, 1), Reserved: set, StateFile: filepath.Join(t.TempDir(), "s"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err == nil {
			t.Errorf("reserved %q accepted", reserved)
		}
	}
}

func metaUID(uid string) metav1.ObjectMeta { return metav1.ObjectMeta{UID: types.UID(uid), Name: uid} }

func TestReadsTheKubeletsCheckpoint(t *testing.T) {
	// From the kubelet's state_checkpoint_test.go (v1.37.2): its checksum
	// of the v4 payload.
	path := filepath.Join(t.TempDir(), "cpu_manager_state")
	kubelets := `{"policyName":"none","defaultCPUSet":"1-9","checksum":1234,"data":"{\"policyName\":\"none\",\"defaultCPUSet\":\"4-6\"}","dataChecksum":657950972}`
	if err := os.WriteFile(path, []byte(kubelets), 0o600); err != nil {
		t.Fatal(err)
	}
	policy, _, err := readState(path)
	if err != nil || policy != "none" {
		t.Fatalf("policy %q, err %v", policy, err)
	}
}

// TestFullPCPUsOnlyAdmitsWholeCoresOnly: on 2 cores of 2 threads with CPU 0
// reserved, a 1-CPU request is refused as not a multiple, a 2-CPU request
// gets the free whole core, and then a second one is refused: CPU 1 is
// free but its core holds a reserved CPU. The counters follow the
// kubelet's.
func TestFullPCPUsOnlyAdmitsWholeCoresOnly(t *testing.T) {
	topo := Topology{CPUs: []CPU{{ID: 0, Core: 0}, {ID: 1, Core: 0}, {ID: 2, Core: 1}, {ID: 3, Core: 1}}}
	m, err := New(Options{Topology: topo, Reserved: cpuset.New(0), FullPhysicalCPUsOnly: true,
		StateFile: filepath.Join(t.TempDir(), "cpu_manager_state"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var smt SMTAlignmentError
	err = m.Allocate(guaranteed("odd", container("app", "1")), nil)
	if !errors.As(err, &smt) || err.Error() != "SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2" || smt.Type() != "SMTAlignmentError" {
		t.Fatalf("1 CPU: err %v, want the kubelet's not-a-multiple SMTAlignmentError", err)
	}
	if err := m.Allocate(guaranteed("even", container("app", "2")), nil); err != nil {
		t.Fatal(err)
	}
	if set, _ := m.CPUs("even", "app"); set.String() != "2-3" {
		t.Fatalf("2 CPUs got %s, want the whole core 2-3", set)
	}
	err = m.Allocate(guaranteed("more", container("app", "2")), nil)
	want := "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = 0, requested CPUs = 2, CPUs per core = 2"
	if err == nil || err.Error() != want {
		t.Fatalf("a third core's worth: err %v, want %q", err, want)
	}
	if ok, failed, _ := m.Alignment(); ok != 1 || failed != 2 {
		t.Errorf("aligned %d, failed %d; want 1, 2", ok, failed)
	}
	if req, failed := m.Pinning(); req != 3 || failed != 2 {
		t.Errorf("pinning requests %d, errors %d; want 3, 2", req, failed)
	}
}
