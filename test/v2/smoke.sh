#!/bin/sh
# The cgroup v2 smoke lane, run inside the VM (systemd as PID 1, unified
# hierarchy) from /work, where `make test-v2` put the binaries, templates
# and the systemd unit. It starts containerd and the agent, runs the example pods and
# checks the QoS tree's v2 values on the real kernel. Prints PASS/FAIL
# lines; exits non-zero on any failure.
set -u
W=/work
# containerd, runc and the CNI plugins the host runs (make test-v2 copies them).
export PATH=$W/runtime:$PATH
failures=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
check() { # check NAME GOT WANT
	if [ "$2" = "$3" ]; then pass "$1 = $3"; else fail "$1 = '$2', want '$3'"; fi
}
# busybox's wget crashes in this guest: the API is probed with nodectl.
api() { $W/bin/nodectl get node >/dev/null 2>&1; }

echo "== the host"
check "PID 1" "$(cat /proc/1/comm)" systemd
check "cgroup filesystem" "$(stat -f -c %T /sys/fs/cgroup)" cgroup2fs
for c in cpu memory pids; do
	grep -qw "$c" /sys/fs/cgroup/cgroup.controllers && pass "controller $c" || fail "controller $c missing"
done
[ -r /proc/pressure/memory ] && pass "PSI available" || fail "no /proc/pressure/memory"

# live_test PACKAGE FILE: run a package's Live tests (built by make test-v2
# into $W/bin/PACKAGE.test) and show their log lines from FILE.
live_test() {
	if live_out=$($W/bin/$1.test -test.run 'Live' -test.v 2>&1); then
		pass "$1 live test"
	else
		fail "$1 live test"
	fi
	echo "$live_out" | grep -E "$2|---" | sed 's/^/  /'
}

echo "== memory stats on the real kernel (cgroups package, live test)"
# memory.current, memory.stat inactive_file, memory.events and
# memory.pressure of a cgroup whose process is OOM-killed, and the root's.
live_test cgroups 'stats_live_test|manager_live_test'
# It skips where systemd is not PID 1: here it must have run.
echo "$live_out" | grep -q -- '--- PASS: TestSystemdMemoryHighLive' && pass "memory.high through systemd survives a realization of the slice" || fail "TestSystemdMemoryHighLive did not pass"

echo "== kernel notifications the eviction manager wakes on (eviction package, live test)"
# A memory.high tripwire and a PSI trigger on a cgroup whose process
# outgrows the wire, and the node-wide PSI trigger.
live_test eviction notify_live_test

echo "== containerd (registry through the host's loopback at 10.0.2.2)"
. $W/containerd.sh
start_containerd $W/runtime && pass "containerd up" || fail "containerd did not start"
# The images first, as on a provisioned node: containerd's root is a tmpfs,
# and a cold pull through the host under TCG took most of the first test's
# minute to run its pods.
t0=$(date +%s)
for ref in "$PAUSE_IMAGE" "$TEST_IMAGE"; do
	if out=$(ctr --address /run/nodeagent-runtime/containerd.sock -n k8s.io images pull \
		--hosts-dir $HOSTS_DIR "$ref" 2>&1); then
		pass "$ref pulled ($(($(date +%s) - t0)) s from the start)"
	else
		fail "pull $ref: $(printf '%s' "$out" | tail -n 2)"
	fi
done

echo "== Go integration tests on cgroup v2: ${V2_GO_TESTS:-none}"
# The suite the host runs on v1 (test/integration), reading cgroups through
# the cgroups package; its agents' directories on a tmpfs (9p has no
# inotify, no tmpfs-style mounts below). The cluster tests need the host's
# control plane: make test-v2-full runs the rest.
if [ -n "${V2_GO_TESTS:-}" ]; then
	mkdir -p /var/tmp/itest && mount -t tmpfs -o size=1g tmpfs /var/tmp/itest
	cp=absent # the cluster tests' control plane, with V2_CONTROLPLANE=1
	[ -n "${V2_CONTROLPLANE:-}" ] && cp=controlplane
	t0=$(date +%s)
	if TMPDIR=/var/tmp/itest CRI_ENDPOINT=unix:///run/nodeagent-runtime/containerd.sock \
		NODEAGENT_BIN=$W/bin/nodeagent NODECTL_BIN=$W/bin/nodectl MIXIN_SERIES_BIN=$W/bin/absent \
		CONTROLPLANE_BIN=$W/bin/$cp NODE_ADDRESS=10.0.2.15 \
		TEST_IMAGE=$TEST_IMAGE PAUSE_IMAGE=$PAUSE_IMAGE \
		$W/bin/integration.test -test.run "$V2_GO_TESTS" -test.v -test.timeout "${V2_GO_TIMEOUT:-20m}" >$W/integration.log 2>&1; then
		pass "Go integration tests ($(($(date +%s) - t0)) s)"
	else
		fail "Go integration tests ($(($(date +%s) - t0)) s; log: bin/v2/integration.log)"
	fi
	grep -E '^(--- |ok|FAIL|PASS|panic)|_test.go:[0-9]+:' $W/integration.log | sed 's/^/  /'
	umount /var/tmp/itest
fi

echo "== the agent (cgroupfs driver on the unified hierarchy)"
mkdir -p /etc/nodeagent/manifests
cp $W/examples/pods/*.yaml /etc/nodeagent/manifests/
sed -e "s|@CRI_ENDPOINT@|unix:///run/nodeagent-runtime/containerd.sock|" -e "s|@MANIFESTS@|/etc/nodeagent/manifests|" \
	$W/examples/nodeagent.yaml >/etc/nodeagent/config.yaml
# This first agent also runs with 1.37's memory QoS protection and a
# throttling factor (the gate is on by default; v2 only).
sed -e 's|^memoryReservationPolicy: .*|memoryReservationPolicy: TieredReservation|' -e 's|^# memoryThrottlingFactor: |memoryThrottlingFactor: |' \
	/etc/nodeagent/config.yaml >/etc/nodeagent/memoryqos.yaml
$W/bin/nodeagent --config /etc/nodeagent/memoryqos.yaml --hostname-override v2 >$W/agent.log 2>&1 &
agent=$!
for i in $(seq 300); do api && break; sleep 0.2; done
running=0
for i in $(seq 300); do
	running=$($W/bin/nodectl get pods | grep -c Running)
	[ "$running" -ge 3 ] && break
	sleep 1
done
check "example pods running" "$running" 3
$W/bin/nodectl get pods
ready=
for i in $(seq 60); do
	ready=$($W/bin/nodectl get pods | awk '$1 ~ /^health-/ {print $2}')
	[ "$ready" = 1/1 ] && break
	sleep 1
done
check "health pod ready (HTTP readiness probe)" "$ready" 1/1

echo "== QoS tree values (cgroup v2)"
cg=/sys/fs/cgroup/kubepods
# In the shell: mawk's printf %d stops at 2^31-1.
mem=$(($(sed -n 's/^MemTotal: *\([0-9]*\) kB$/\1/p' /proc/meminfo) * 1024))
cpus=$(nproc)
# kubepods: shares = cpus*1024, as v2 weight 1 + (s-2)*9999/262142; memory = capacity - 384Mi reserved
check "kubepods cpu.weight" "$(cat $cg/cpu.weight)" "$((1 + (cpus * 1024 - 2) * 9999 / 262142))"
check "kubepods memory.max" "$(cat $cg/memory.max)" "$((mem - 384 * 1024 * 1024))"
check "burstable cpu.weight (100m)" "$(cat $cg/burstable/cpu.weight)" 4
check "besteffort cpu.weight" "$(cat $cg/besteffort/cpu.weight)" 1
uid() { $W/bin/nodectl get pod "$1" -o json | sed -n 's/.*"uid": "\([0-9a-f]*\)".*/\1/p' | head -n 1; }
g=$cg/pod$(uid health)
check "guaranteed pod cpu.max" "$(cat $g/cpu.max)" "25000 100000"
check "guaranteed pod memory.max" "$(cat $g/memory.max)" 67108864
check "guaranteed pod pids.max" "$(cat $g/pids.max)" 4096
check "guaranteed pod cpu.weight (250m)" "$(cat $g/cpu.weight)" 10
b=$cg/burstable/pod$(uid web)
check "burstable pod memory.max" "$(cat $b/memory.max)" 67108864
check "burstable pod cpu.max" "$(cat $b/cpu.max)" "max 100000"
e=$cg/besteffort/pod$(uid ticker)
check "besteffort pod cpu.weight" "$(cat $e/cpu.weight)" 1

echo "== memoryQoS values (memoryReservationPolicy: TieredReservation, memoryThrottlingFactor: 0.9)"
# health: Guaranteed, 64Mi; web: Burstable, request 32Mi, limit 64Mi.
check "kubepods memory.min (Guaranteed + Burstable requests)" "$(cat $cg/memory.min)" $(((64 + 32) << 20))
check "kubepods memory.low (Burstable requests)" "$(cat $cg/memory.low)" $((32 << 20))
check "burstable memory.low (Burstable requests)" "$(cat $cg/burstable/memory.low)" $((32 << 20))
check "burstable memory.min" "$(cat $cg/burstable/memory.min)" 0
check "besteffort memory.min" "$(cat $cg/besteffort/memory.min)" 0
check "burstable pod memory.low" "$(cat $b/memory.low)" $((32 << 20))
check "burstable pod memory.min" "$(cat $b/memory.min)" 0
check "guaranteed pod memory.min" "$(cat $g/memory.min)" $((64 << 20))
# Containers (and the pause sandbox beside them, with nothing):
# memory.high = floor((32Mi + 0.9 × 32Mi) / 4096) × 4096; none for
# Guaranteed; a BestEffort container's goes 0.9 of the way to allocatable.
check "burstable containers' memory.low" "$(cat $b/*/memory.low | sort -n | tr '\n' ' ')" "0 $((32 << 20)) "
check "burstable containers' memory.min" "$(cat $b/*/memory.min | sort -u | tr '\n' ' ')" "0 "
check "guaranteed containers' memory.min" "$(cat $g/*/memory.min | sort -n | tr '\n' ' ')" "0 $((64 << 20)) "
check "burstable containers' memory.high" "$(cat $b/*/memory.high | sort | tr '\n' ' ')" "63750144 max "
check "guaranteed containers' memory.high" "$(cat $g/*/memory.high | sort -u | tr '\n' ' ')" "max "
check "besteffort containers' memory.high" "$(cat $e/*/memory.high | sort | tr '\n' ' ')" "$(((mem - (384 << 20)) * 9 / 10 / 4096 * 4096)) max "

# stats_check DRIVER DIR: nodectl top (from /stats/summary, through
# cadvisor's raw handler) shows the health pod with CPU and a working set
# that matches its cgroup DIR's memory.current - inactive_file (4 MiB of
# slack: the Summary is sampled every 10 s), and the node's row is whole.
stats_check() {
	local row ws cur inactive want
	for i in $(seq 40); do
		row=$($W/bin/nodectl top pods 2>/dev/null | awk '$2 ~ /^health-/')
		case "$row" in "" | *unknown*) sleep 1 ;; *) break ;; esac
	done
	ws=$(echo "$row" | awk '{sub(/Mi$/, "", $4); print $4}')
	cur=$(cat $2/memory.current)
	inactive=$(sed -n 's/^inactive_file //p' $2/memory.stat)
	want=$(((cur - inactive) >> 20))
	if [ -n "$ws" ] && [ "$ws" -ge $((want - 4)) ] && [ "$ws" -le $((want + 4)) ] && ! echo "$row" | grep -q unknown; then
		pass "stats ($1): health pod in nodectl top ($(echo $row | awk '{print $3, $4}'); cgroup working set ${want}Mi)"
	else
		fail "stats ($1): health pod row '$row', cgroup working set ${want}Mi"
	fi
	row=$($W/bin/nodectl top node 2>&1 | tail -n 1)
	case "$row" in *unknown* | *rror*) fail "stats ($1): node row '$row'" ;; *) pass "stats ($1): node row complete" ;; esac
}

echo "== stats (cgroup v2)"
stats_check cgroupfs $g

echo "== delete"
$W/bin/nodectl delete pod ticker --wait --grace-period 0 >/dev/null
[ ! -d "$e" ] && pass "besteffort pod cgroup removed" || fail "besteffort pod cgroup left at $e"

echo "== the systemd cgroup driver"
for p in health web; do $W/bin/nodectl delete pod $p --wait --grace-period 0 >/dev/null; done
kill $agent; wait $agent 2>/dev/null
pkill containerd; while pgrep -x containerd >/dev/null; do sleep 0.2; done
sed -i 's/SystemdCgroup = false/SystemdCgroup = true/' /var/lib/nodeagent-runtime/containerd.toml
containerd --config /var/lib/nodeagent-runtime/containerd.toml >>/var/log/containerd.log 2>&1 &
for i in $(seq 100); do [ -S /run/nodeagent-runtime/containerd.sock ] && ctr --address /run/nodeagent-runtime/containerd.sock version >/dev/null 2>&1 && break; sleep 0.2; done
# The config still says cgroupfs: the runtime's driver (RuntimeConfig)
# wins, with a warning, as the kubelet does since 1.34.
cp $W/examples/pods/*.yaml /etc/nodeagent/manifests/
$W/bin/nodeagent --config /etc/nodeagent/config.yaml --hostname-override v2 >$W/agent-systemd.log 2>&1 &
agent=$!
for i in $(seq 300); do
	running=$($W/bin/nodectl get pods 2>/dev/null | grep -c Running)
	[ "$running" -ge 3 ] && break
	sleep 1
done
check "example pods running (systemd driver)" "$running" 3
grep -q "the container runtime's cgroup driver is used" $W/agent-systemd.log && pass "the runtime's driver wins over the config's, with a warning" || fail "no driver warning in bin/v2/agent-systemd.log"
s=/sys/fs/cgroup/kubepods.slice
check "kubepods.slice cpu.weight" "$(cat $s/cpu.weight)" "$((1 + (cpus * 1024 - 2) * 9999 / 262142))"
check "kubepods.slice memory.max" "$(cat $s/memory.max)" "$((mem - 384 * 1024 * 1024))"
check "kubepods-burstable.slice cpu.weight" "$(cat $s/kubepods-burstable.slice/cpu.weight)" 4
check "kubepods-besteffort.slice cpu.weight" "$(cat $s/kubepods-besteffort.slice/cpu.weight)" 1
gu=kubepods-pod$(uid health).slice
check "guaranteed pod slice cpu.max" "$(cat $s/$gu/cpu.max)" "25000 100000"
check "guaranteed pod slice memory.max" "$(cat $s/$gu/memory.max)" 67108864
check "guaranteed pod slice pids.max" "$(cat $s/$gu/pids.max)" 4096
check "systemd MemoryMax of $gu" "$(systemctl show -P MemoryMax $gu)" 67108864
stats_check systemd $s/$gu
ls $s/$gu | grep -q '^cri-containerd-.*\.scope$' && pass "containers are scopes in the pod slice" || fail "no container scope in $s/$gu: $(ls $s/$gu)"
groups=$(cat $s/$gu/cri-containerd-*.scope/memory.oom.group | sort -u | tr '\n' ' ')
case "$groups" in *1*) pass "memory.oom.group=1 on the pod's containers" ;; *) fail "memory.oom.group of the pod's scopes: $groups" ;; esac
cat >/etc/nodeagent/manifests/hog.yaml <<EOF
apiVersion: v1
kind: Pod
metadata: {name: hog}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: $TEST_IMAGE
    command: ["memhog", "--mb", "128", "--rate", "0"]
    resources:
      limits: {memory: 32Mi}
EOF
reason=
for i in $(seq 120); do
	reason=$($W/bin/nodectl get pod hog -o json 2>/dev/null | sed -n 's/.*"reason": "\(OOMKilled\)".*/\1/p' | head -n 1)
	[ -n "$reason" ] && break
	sleep 1
done
check "container over its memory limit (systemd driver)" "$reason" OOMKilled
rm /etc/nodeagent/manifests/hog.yaml
cat >/etc/nodeagent/manifests/probed.yaml <<EOF
apiVersion: v1
kind: Pod
metadata: {name: probed}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: $TEST_IMAGE
    command: [probe-server, --start-unhealthy]
    livenessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1, failureThreshold: 1}
EOF
restarts=0
for i in $(seq 120); do
	restarts=$($W/bin/nodectl get pod probed -o json 2>/dev/null | sed -n 's/.*"restartCount": \([0-9]*\).*/\1/p' | head -n 1)
	[ "${restarts:-0}" -ge 1 ] && break
	sleep 1
done
[ "${restarts:-0}" -ge 1 ] && pass "failing liveness probe restarted the container (systemd driver)" || fail "liveness restarts: '${restarts}'"
$W/bin/nodectl describe pod probed | grep -q "failed liveness probe, will be restarted" && pass "Killing event for the liveness failure" || fail "no liveness Killing event"
rm /etc/nodeagent/manifests/probed.yaml
ticker=$(uid ticker)
be=kubepods-besteffort-pod$ticker.slice
$W/bin/nodectl delete pod ticker --wait --grace-period 0 >/dev/null
check "besteffort pod slice after delete" "$(systemctl is-active $be)" inactive
if [ ! -d "$s/kubepods-besteffort.slice/$be" ]; then
	pass "besteffort pod slice removed"
else
	fail "besteffort pod slice left"
	systemctl status --no-pager $be 2>&1 | sed 's/^/  /'
	grep -E "$ticker|reconcile|cgroup" $W/agent-systemd.log | tail -n 20 | sed 's/^/  /'
fi

echo "== eviction on cgroup v2 (memory.high tripwire on kubepods.slice)"
kill $agent; wait $agent 2>/dev/null
# kubepods gets 1 GiB (systemReserved 256Mi + kubeReserved the rest), and
# allocatableMemory.available<300Mi puts the wire 724 MiB into it.
reserved=$((mem - 1024 * 1024 * 1024 - 256 * 1024 * 1024))
sed -e "s|^  memory: 128Mi|  memory: \"$reserved\"|" -e 's|^  memory.available: 100Mi|  memory.available: 100Mi\n  allocatableMemory.available: 300Mi|' \
	/etc/nodeagent/config.yaml >/etc/nodeagent/evict.yaml
echo "evictionPressureTransitionPeriod: 10s" >>/etc/nodeagent/evict.yaml
# The wire sits a few MiB above the line (see below), and the hog crosses
# that band in tens of milliseconds under TCG: a 1 s poll landed in it once
# and took the decision. A 30 s poll leaves the decision to the kernel's
# signals, and would still evict (late, failing the check) were they broken.
$W/bin/nodeagent --config /etc/nodeagent/evict.yaml --hostname-override v2 --eviction-poll-period 30s >$W/agent-evict.log 2>&1 &
agent=$!
for i in $(seq 60); do api && break; sleep 0.5; done
# The first observation (right after start) arms it.
for i in $(seq 20); do high=$(cat $s/memory.high); [ "$high" != max ] && break; sleep 0.5; done
# The wire goes at least 4 MiB above the line (724 MiB + inactive_file),
# so that the kernel holding usage at memory.high holds it past the line.
[ "$high" != max ] && [ "$high" -ge $(((724 + 4) << 20)) ] && pass "kubepods.slice memory.high set as a tripwire above the line ($high)" || fail "kubepods.slice memory.high = $high, want >= $(((724 + 4) << 20))"
psi=$(grep -c 'PSI trigger armed' $W/agent-evict.log)
check "PSI triggers armed (node and kubepods.slice)" "$psi" 2
ooms=$(sed -n 's/^oom_kill //p' /proc/vmstat)
cat >/etc/nodeagent/manifests/hog.yaml <<EOF
apiVersion: v1
kind: Pod
metadata: {name: hog}
spec:
  containers:
  - name: main
    image: $TEST_IMAGE
    command: ["memhog", "--mb", "2000", "--rate", "0"]
EOF
reason=
for i in $(seq 120); do
	reason=$($W/bin/nodectl get pod hog -o jsonpath='{.status.reason}' 2>/dev/null)
	[ -n "$reason" ] && break
	sleep 1
done
check "BestEffort hog past the tripwire" "$reason" Evicted
check "kernel OOM kill count unchanged by the eviction" "$(sed -n 's/^oom_kill //p' /proc/vmstat)" "$ooms"
$W/bin/nodectl get evictions -o json | grep -q '"triggeredBy": "\(memory.high tripwire\|PSI trigger\)"' && pass "the decision was woken by memory.events or PSI" || fail "the decision was not event-driven: $($W/bin/nodectl get evictions)"
$W/bin/nodectl get evictions | sed 's/^/  /'
rm /etc/nodeagent/manifests/hog.yaml
kill $agent; wait $agent 2>/dev/null
check "kubepods.slice memory.high after the agent stopped" "$(cat $s/memory.high)" max

echo "== the agent as a systemd service"
install -m 755 $W/bin/nodeagent /usr/local/bin/nodeagent
# The project's unit, with a short watchdog for the test and this node's name.
sed -e 's|^ExecStart=.*|ExecStart=/usr/local/bin/nodeagent --config /etc/nodeagent/config.yaml --hostname-override v2|' \
	-e 's|^WatchdogSec=.*|WatchdogSec=6s|' -e 's|^TimeoutStopSec=.*|TimeoutStopSec=10s|' \
	$W/deploy/systemd/nodeagent.service >/etc/systemd/system/nodeagent.service
systemctl daemon-reload
containers() { $W/bin/nodectl get pods -o json | grep -o '"containerID": "[^"]*"' | sort | tr '\n' ' '; }
tasks() { ctr --address /run/nodeagent-runtime/containerd.sock -n k8s.io tasks ls | grep -c RUNNING; }
systemctl start nodeagent # returns once the agent sent READY=1
check "nodeagent.service after start" "$(systemctl is-active nodeagent)" active
api && pass "API up when READY=1 arrived" || fail "API not up although the unit is active"
for i in $(seq 60); do [ "$($W/bin/nodectl get pods | grep -c Running)" -ge 2 ] && break; sleep 1; done
before=$(containers)
[ -n "$before" ] && pass "pods re-adopted by the service" || fail "no pods listed under the service"
systemctl restart nodeagent
check "nodeagent.service after restart" "$(systemctl is-active nodeagent)" active
for i in $(seq 60); do [ "$(containers)" = "$before" ] && break; sleep 1; done
check "containers across systemctl restart" "$(containers)" "$before"
restarts=$(systemctl show -P NRestarts nodeagent)
kill -STOP "$(systemctl show -P MainPID nodeagent)"
for i in $(seq 90); do [ "$(systemctl show -P NRestarts nodeagent)" -gt "$restarts" ] && break; sleep 1; done
[ "$(systemctl show -P NRestarts nodeagent)" -gt "$restarts" ] && pass "watchdog restarted the hung agent" || fail "hung agent not restarted (NRestarts $(systemctl show -P NRestarts nodeagent))"
for i in $(seq 60); do [ "$(systemctl is-active nodeagent)" = active ] && [ "$(containers)" = "$before" ] && break; sleep 1; done
check "containers across the watchdog restart" "$(containers)" "$before"
running=$(tasks)
systemctl stop nodeagent
check "nodeagent.service after stop" "$(systemctl is-active nodeagent)" inactive
check "pod tasks still running after systemctl stop" "$(tasks)" "$running"

echo "== summary: $failures failure(s)"
exit $failures
