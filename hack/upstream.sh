#!/usr/bin/env bash
# The upstream Kubernetes node e2e suite (k8s.io/kubernetes/test/e2e_node)
# against nodeagent.
#
#   hack/upstream.sh build   build bin/upstream/{e2e_node.test,ginkgo,agnhost}
#                            (cached by release and module hash)
#   hack/upstream.sh run     push the suite's images, start its services
#                            and nodeagent joined to them, run the focused
#                            specs; results in bin/conformance-upstream/
#   hack/upstream.sh quick   run, on the QUICK subset below (CI runs it)
#   hack/upstream.sh serial  the [Serial] specs that reconfigure and restart
#                            the node (eviction, OOM, PIDs, critical pods,
#                            restarts, log rotation, image GC), one at a
#                            time, nodeagent driven through the sudo and
#                            systemctl stand-ins; results in
#                            bin/conformance-upstream-serial
#   hack/upstream.sh serial-quick  serial, on the SERIAL_QUICK subset (CI)
#   hack/upstream.sh serial-v2  the GracefulNodeShutdown specs, serial, in
#                            the cgroup v2 VM (hack/vm.sh), where systemd,
#                            logind and the system bus are real: the host
#                            prepares, the guest runs test/v2/upstream.sh;
#                            results in bin/v2-upstream/bin/conformance-upstream-serial
#   hack/upstream.sh cpumanager-v2  serial-v2 on the CPU manager specs
#                            (CPUMANAGER_FOCUS; about 40 min)
#   hack/upstream.sh kubelet build bin/upstream/kubelet, the real kubelet
#                            (the peer of make bench; cached likewise)
#   hack/upstream.sh busybox build bin/upstream/busybox, the images' base
#                            (cached by version)
#
# run's settings (environment): UPSTREAM_FOCUS (default \[NodeConformance\]),
# UPSTREAM_SKIP (added to the named skips below), UPSTREAM_PROCS (parallel
# ginkgo processes, default 4), UPSTREAM_TIMEOUT (default 90m), AGENT
# (nodeagent, the default, or kubelet: the control run, the same specs
# against the real kubelet of the release on a containerd of its own,
# results in bin/conformance-upstream-kubelet). UPSTREAM_PHASE: all (the
# default), prepare (build and push the images only) or execute (the rest,
# on a node that has the prepared files: the v2 VM). HOSTS_DIR: the
# runtime's registry hosts directory, where the registry is not at
# 127.0.0.1 (the VM). SERVICES_WAIT, NODE_WAIT: seconds for the services
# and the node to come up (120, 60). UPSTREAM_FLAKY=1 (serial): run the
# specs upstream marks [Flaky] too. CONTROL_SOCKET: the agent's, where RUN_OUT cannot hold a socket (9p).
#
# The binaries come from hack/e2enode, a Go module of its own that
# requires k8s.io/kubernetes at a release; the agent's go.mod never does.
set -euo pipefail

HERE=$(cd "$(dirname "$0")/.." && pwd)
MODULE=$HERE/hack/e2enode
BIN_DIR=${BIN_DIR:-bin}
OUT=$HERE/$BIN_DIR/upstream
CACHE=${CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodeagent}
GO=${GO:-go}

log() { printf 'upstream: %s\n' "$*" >&2; }
die() { printf 'upstream: error: %s\n' "$*" >&2; exit 1; }


# cached NAME CMD...: build NAME into the cache with CMD (which writes
# "$target") unless it is there, and link it into bin/upstream.
cached() {
	local name=$1 ver key target start
	shift
	ver=$(k8s_version "$MODULE")
	[ -n "$ver" ] || die "no k8s.io/kubernetes requirement in $MODULE/go.mod"
	key=$(cd "$MODULE" && cat go.mod go.sum | sha256sum | cut -c1-12)
	target=$CACHE/upstream-$ver-$key/$name
	if [ ! -x "$target" ]; then
		mkdir -p "$(dirname "$target")"
		log "building $name from k8s.io/kubernetes $ver"
		start=$SECONDS
		(cd "$MODULE" && target=$target.tmp "$@")
		mv "$target.tmp" "$target"
		log "built $name in $((SECONDS - start)) s"
	fi
	mkdir -p "$OUT"
	ln -f "$target" "$OUT/$name" 2>/dev/null || cp "$target" "$OUT/$name"
}

build() {
	# The suite: a test binary, vet off (k8s.io/kubernetes is vetted upstream).
	cached e2e_node.test sh -c '$0 test -c -vet=off -trimpath -o "$target" k8s.io/kubernetes/test/e2e_node' "$GO"
	cached ginkgo sh -c '$0 build -trimpath -o "$target" github.com/onsi/ginkgo/v2/ginkgo' "$GO"
	# agnhost goes into an image: static.
	cached agnhost sh -c 'CGO_ENABLED=0 $0 build -trimpath -ldflags "-s -w" -o "$target" k8s.io/kubernetes/test/images/agnhost' "$GO"
}

# kubelet: the real kubelet of the release, the peer the benchmarks,
# experiments and control runs measure nodeagent against (e2e/launch's
# Kubelet), stamped with its version as the release's own build is.
kubelet() {
	local ver minor v=k8s.io/component-base/version
	ver=$(k8s_version "$MODULE")
	minor=${ver#v1.}
	minor=${minor%%.*}
	cached kubelet sh -c '$0 build -trimpath -ldflags "-s -w -X $1.gitVersion=$2 -X $1.gitMajor=1 -X $1.gitMinor=$3 -X $1.gitTreeState=clean" -o "$target" k8s.io/kubernetes/cmd/kubelet' \
		"$GO" "$v" "$ver" "$minor"
}

# BUSYBOX: the images' base, built from busybox's source with its defconfig,
# as upstream's busybox image is. Debian's busybox-static will not do: it
# lacks nmeter, which the lifecycle specs time with, and a Debian patch makes
# its ash drop environment variables whose names are not shell identifiers,
# which the ConfigMap and Secret specs print with sh -c env.
BUSYBOX_VERSION=1.37.0
BUSYBOX_SHA256=3311dff32e746499f4df0d5df04d7eb396382d7e108bb9250e7b519b837043a4
BUSYBOX_URLS=(
	"http://deb.debian.org/debian/pool/main/b/busybox/busybox_$BUSYBOX_VERSION.orig.tar.bz2"
	"https://busybox.net/downloads/busybox-$BUSYBOX_VERSION.tar.bz2"
)

busybox() {
	local target=$CACHE/busybox-$BUSYBOX_VERSION/busybox work url start
	if [ ! -x "$target" ]; then
		apt_need curl gcc make bzip2 libc6-dev
		work=$CACHE/busybox-$BUSYBOX_VERSION/build
		rm -rf "$work" && mkdir -p "$work"
		for url in "${BUSYBOX_URLS[@]}"; do
			curl -fsSL --retry 3 -o "$work/src.tar.bz2" "$url" && break
			log "could not fetch $url"
		done
		echo "$BUSYBOX_SHA256  $work/src.tar.bz2" | sha256sum --check --quiet - ||
			die "busybox $BUSYBOX_VERSION source: no download, or its sha256 is not $BUSYBOX_SHA256"
		log "building busybox $BUSYBOX_VERSION (defconfig, static; about a minute)"
		start=$SECONDS
		tar -xjf "$work/src.tar.bz2" -C "$work"
		(
			cd "$work/busybox-$BUSYBOX_VERSION" &&
				make defconfig &&
				sed -i 's/^# CONFIG_STATIC is not set$/CONFIG_STATIC=y/' .config &&
				make -j"$(nproc)" busybox
		) >"$work/build.log" 2>&1 || { tail -20 "$work/build.log" >&2; die "busybox build failed (log: $work/build.log)"; }
		mv "$work/busybox-$BUSYBOX_VERSION/busybox" "$target"
		rm -rf "$work"
		log "built busybox in $((SECONDS - start)) s"
	fi
	mkdir -p "$OUT"
	ln -f "$target" "$OUT/busybox" 2>/dev/null || cp "$target" "$OUT/busybox"
}

# SKIPS: what cannot run on these machines at all, each with its reason
# (regexp, then why). docs/upstream-conformance.md explains them.
SKIPS=(
	'\[Feature:NodeSwap\]' "the nodes here have no swap"
	'\[Disruptive\]' "restarts the runtime or the kubelet through systemd, which is not PID 1 here"
	'PrivilegedPod .*should enable privileged commands' "adds a dummy network device, a link type this kernel lacks"
	'temporarily failed termination due to volume failing to unmount' "mounts an NFS volume: this kernel has neither an NFS client nor an NFS server"
	'POD Resources API .*podresources metrics' "a [Serial] spec of the pod resources API: it runs in the serial target (hack/upstream.sh serial)"
	'OOMKiller \[LinuxOnly\]' "rewrites the kubelet's configuration and restarts it through sudo and systemd, neither of which is here"
	'ImageGarbageCollect when ImageMaximumGCAge|Kubelet Endpoints when config is updated|KubletTLS certificate reload|ReloadKubeletClientCAFileTest' "rewrites the kubelet's configuration and restarts it through sudo and systemd, neither of which is here"
	'MirrorPod when kubelet restarts|StaticPod when the static pod has .* kubelet restarts|A node running restartable init containers reboots' "restarts the kubelet through sudo and systemd, neither of which is here"
)

# QUICK: the subset CI runs next to make test, a few minutes on 2 cores:
# the [NodeConformance] specs of these groups (volumes, security context,
# runtime, cgroups, hosts files), without the Slow ones.
QUICK_GROUPS=(
	'ConfigMap' 'Secrets' 'EmptyDir volumes' 'HostPath' 'Downward API' 'Projected'
	'Container Runtime' 'Containers should' 'Security Context' 'Variable Expansion' 'Sysctls'
	'Kubelet Cgroup Manager' 'KubeletManagedEtcHosts' 'Hostname of Pod' 'RuntimeClass'
	'DefaultProcMount' 'Mount recursive read-only'
)
QUICK_SKIP='\[Slow\]'

# SERIAL_FOCUS: the specs that restart the node with another configuration
# (test/e2e_node/util.go's updateKubeletConfig and restartKubelet), which
# the stand-ins make possible here.
SERIAL_FOCUS='\[Feature:Eviction\]|OOMKiller|PodPidsLimit|SystemNodeCriticalPod|CriticalPod|Restart (Kubelet|Container Runtime)|ContainerLogRotation|ImageGarbageCollect|POD Resources API .*podresources metrics|Kubelet Endpoints when config is updated|KubletTLS certificate reload|ReloadKubeletClientCAFileTest|MirrorPod when kubelet restarts|StaticPod when the static pod has .* kubelet restarts|A node running restartable init containers reboots'
SERIAL_SKIPS=(
	'\[Feature:NodeSwap\]' "the nodes here have no swap"
	'\[Flaky\]' "upstream marks it flaky"
)
# SERIAL_QUICK: the serial specs CI runs, about 2 minutes. The memory
# eviction spec (MemoryAllocatableEviction, 5 minutes of a slowly growing
# hog) runs in the serial target; CI covers that path with the agent's own
# eviction tests.
SERIAL_QUICK='OOMKiller \[LinuxOnly\] (single process|init) container|PodPidsLimit'

# SERIAL_CONFIG: upstream's node e2e eviction settings
# (test/e2e_node/jenkins/default-kubelet-config.yaml), which the eviction
# specs are written against.
SERIAL_CONFIG='evictionPressureTransitionPeriod: 30s
evictionHard: {memory.available: 250Mi, nodefs.available: 10%, nodefs.inodesFree: 5%}
evictionMinimumReclaim: {nodefs.available: 5%, nodefs.inodesFree: 5%}
fileCheckFrequency: 10s
volumeStatsAggPeriod: 10s'

# serial: the serial specs with the stand-ins on the suite's PATH and the
# unit they drive; the suite writes its configurations to
# $OUT/kubelet-config (its working directory), which the unit then starts
# the agent with. AGENT=kubelet: the control run, the real kubelet as that
# unit (nodetest peer kubelet --unit).
serial() {
	RUN_OUT=${SERIAL_OUT:-$HERE/$BIN_DIR/conformance-upstream-serial}
	if [ "$AGENT" = kubelet ]; then RUN_OUT+=-kubelet; fi
	SKIPS=("${SERIAL_SKIPS[@]}")
	# UPSTREAM_FLAKY=1: the specs upstream marks flaky run too.
	if [ -n "${UPSTREAM_FLAKY:-}" ]; then SKIPS=('\[Feature:NodeSwap\]' "the nodes here have no swap"); fi
	UPSTREAM_FOCUS=${UPSTREAM_FOCUS:-$SERIAL_FOCUS}
	UPSTREAM_PROCS=1
	SUITE_TITLE="upstream serial"
	EXTRA_CONFIG=$SERIAL_CONFIG
	local shims=$OUT/standin
	rm -rf "$shims" && mkdir -p "$shims"
	ln -s "$HERE/$BIN_DIR/nodetest" "$shims/systemctl"
	ln -s "$HERE/$BIN_DIR/nodetest" "$shims/sudo"
	rm -f "$OUT/kubelet-config"
	SUITE_ENV=(PATH="$shims:$PATH" NODETEST_UNIT="$RUN_OUT/agent/unit.json")
	UNIT=$RUN_OUT/agent/unit.json
	# The Restart specs SIGKILL containerd by its pid file; runtime-up's
	# supervisor starts it again. The control kubelet's containerd has
	# neither: those specs are not the control run's.
	local rundir=${CRI_ENDPOINT#unix://}
	if [ "$AGENT" = nodeagent ]; then
		SUITE_ARGS=(--container-runtime-process-name=containerd --container-runtime-pid-file="${rundir%/*}/containerd.pid")
	fi
	run
}

serial_quick() {
	UPSTREAM_FOCUS=$SERIAL_QUICK serial
}

# SERIAL_V2_FOCUS: the serial specs that need systemd as PID 1, logind and
# a system bus; the VM has them.
SERIAL_V2_FOCUS='GracefulNodeShutdown'
# CPUMANAGER_FOCUS: the CPU manager specs (cpumanager-v2), the pod-level
# resource managers' left out: that gate is beta and off by default in
# 1.37, and nodeagent has no topology manager. They run on 8 threads of 4
# cores (qemu TCG, on any host), so the SMT and multi-CPU specs run. CI
# leaves them out: with the 3 SMT alignment specs beside
# GracefulNodeShutdown in a VM of 8 vCPUs, that lane took 13.6 min, not 4.4.
CPUMANAGER_FOCUS='CPU Manager (Metrics )?\[Feature:CPUManager\]'

# serial_v2: prepare here, then run the serial specs of SERIAL_V2_FOCUS in
# the v2 VM with the suite, its services and the agent all inside it (the
# specs emit logind's signal on the node's own bus and restart the agent
# through the stand-ins there). The VM's work directory mirrors this
# tree's layout, so the same script runs there as /work/hack/upstream.sh.
serial_v2() {
	need_root
	[ -x "$HERE/$BIN_DIR/nodetest" ] || die "$BIN_DIR/nodetest missing: run 'make build' first"
	local work=$HERE/$BIN_DIR/v2-upstream f focus=${UPSTREAM_FOCUS:-$SERIAL_V2_FOCUS}
	rm -rf "$work" && mkdir -p "$work/bin/upstream" "$work/hack" "$work/deploy"
	SERIAL_OUT=$work/bin/conformance-upstream-serial UPSTREAM_PHASE=prepare serial
	for f in e2e_node.test ginkgo report; do ln -f "$OUT/$f" "$work/bin/upstream/$f" 2>/dev/null || cp "$OUT/$f" "$work/bin/upstream/$f"; done
	cp "$HERE/$BIN_DIR/nodeagent" "$HERE/$BIN_DIR/nodetest" "$work/bin/"
	cp -rL "$HERE/$BIN_DIR/runtime" "$work/bin/runtime"
	cp "$HERE/hack/upstream.sh" "$HERE/hack/lib.sh" "$work/hack/"
	cp -r "$HERE/deploy/containerd" "$work/deploy/"
	cp "$HERE/test/v2/containerd.sh" "$HERE/test/v2/upstream.sh" "$work/"
	printf '#!/bin/sh\nexport REGISTRY=%s PAUSE_IMAGE=%s UPSTREAM_FOCUS=%s UPSTREAM_SKIP=%s UPSTREAM_TIMEOUT=%s UPSTREAM_FLAKY=%s\nexec /work/upstream.sh\n' \
		"$REGISTRY" "${PAUSE_IMAGE:?PAUSE_IMAGE: the pause image of the VM runtime}" \
		"'$focus'" "'${UPSTREAM_SKIP:-}'" "${UPSTREAM_TIMEOUT:-60m}" "${UPSTREAM_FLAKY:-}" >"$work/run.sh"
	chmod +x "$work/run.sh"
	local code=0
	VM_MEMORY=${VM_MEMORY:-4096} VM_TIMEOUT=${VM_TIMEOUT:-4500} "$HERE/hack/vm.sh" run "$work" || code=$?
	[ -f "$work/run.log" ] && grep -E '^upstream' "$work/run.log" >&2
	[ -f "$work/bin/conformance-upstream-serial/summary.md" ] && cat "$work/bin/conformance-upstream-serial/summary.md"
	return "$code"
}

quick() {
	local groups
	groups=$(IFS='|'; echo "${QUICK_GROUPS[*]}")
	UPSTREAM_FOCUS="\\[NodeConformance\\].*($groups)|($groups).*\\[NodeConformance\\]" \
		UPSTREAM_SKIP="${UPSTREAM_SKIP:+$UPSTREAM_SKIP|}$QUICK_SKIP" run
}

REGISTRY=${REGISTRY:-127.0.0.1:5050}
CRI_ENDPOINT=${CRI_ENDPOINT:-unix:///run/nodeagent-runtime/containerd.sock}
NODE_ADDRESS=${NODE_ADDRESS:-198.18.0.1}
AGENT=${AGENT:-nodeagent}
case "$AGENT" in
nodeagent) RUN_OUT=$HERE/$BIN_DIR/conformance-upstream ;;
kubelet) RUN_OUT=$HERE/$BIN_DIR/conformance-upstream-kubelet ;;
*) die "AGENT=$AGENT: nodeagent or kubelet" ;;
esac
# The suite reads these paths as the kubelet's: pod volumes under
# /var/lib/kubelet/pods, logs under /var/log/pods.
AGENT_ROOT=/var/lib/kubelet
TOKEN=nodeagent-upstream-token
NODE_NAME=${UPSTREAM_NODE:-$(hostname | tr '[:upper:]' '[:lower:]')}
API=https://127.0.0.1:6443
SUITE_TITLE="upstream NodeConformance"
SUITE_ENV=()
SUITE_ARGS=()
EXTRA_CONFIG=""
UNIT="" # serial: the stand-in unit file the control kubelet runs as

# json_string S: S as a JSON string (backslashes and quotes escaped; the
# paths here hold no control characters).
json_string() {
	local s=${1//\\/\\\\}
	printf '"%s"' "${s//\"/\\\"}"
}

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (the agent runs pods)"; }

# AGNHOST_TOOLS: host programs copied into the agnhost image (with their
# libraries) for the specs that run them there: bash, curl, netcat-openbsd's
# nc and dash as /bin/sh, as in the real image.
AGNHOST_TOOLS=/bin/bash,/usr/bin/curl,/bin/nc.openbsd=/bin/nc,/bin/dash=/bin/sh
deps() { apt_need curl netcat-openbsd dash; }

push_images() {
	local src
	src=$(cd "$MODULE" && "$GO" list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images/agnhost/porter
	"$HERE/$BIN_DIR/imagetool" upstream --push --registry "$REGISTRY" --repo-list "$RUN_OUT/repos.yaml" \
		--busybox "$OUT/busybox" --pause-bin "$HERE/$BIN_DIR/images/pause" --nnp "$HERE/$BIN_DIR/images/nnp" \
		--agnhost-tools "$AGNHOST_TOOLS" \
		--agnhost "$OUT/agnhost" --agnhost-tls "$src/localhost.crt,$src/localhost.key" \
		--pins "$RUN_OUT/pins.txt" >"$RUN_OUT/images.txt"
	log "pushed $(wc -l <"$RUN_OUT/images.txt") images to $REGISTRY (list: $RUN_OUT/images.txt)"
}

# pull_images ENDPOINT: the runtime may hold an older build under the same
# tag, which pods with imagePullPolicy IfNotPresent would run: pull each
# one again. The pre-pull list's names no repo list redirects are then held
# under that name, pinned (internal/images/prepull.go).
pull_images() {
	local ctr=("$HERE/$BIN_DIR/runtime/ctr" --address "${1#unix://}" --namespace k8s.io) ref name out
	local from=(--plain-http)
	[ -n "${HOSTS_DIR:-}" ] && from=(--hosts-dir "$HOSTS_DIR")
	while read -r ref; do
		out=$("${ctr[@]}" images pull "${from[@]}" "${ref%@*}" 2>&1) ||
			{ printf '%s\n' "$out" | tail -n 5 >&2; die "pull ${ref%@*} into the runtime at $1"; }
	done <"$RUN_OUT/images.txt"
	while read -r ref name; do
		out=$({ "${ctr[@]}" images tag --force "$ref" "$name" && "${ctr[@]}" images label "$name" io.cri-containerd.pinned=pinned; } 2>&1) ||
			{ printf '%s\n' "$out" | tail -n 5 >&2; die "hold $name (from $ref) pinned in the runtime at $1"; }
	done <"$RUN_OUT/pins.txt"
}

# The suite reads the read-only port at localhost and the API server
# reaches the kubelet port at NODE_ADDRESS, so the agent listens on every
# address, as the kubelet under the suite does. Anonymous access is on: a
# firewall rule keeps both ports to this machine's own addresses.
KUBELET_PORT=10250
READ_ONLY_PORT=10255
FW_RULE=(INPUT -p tcp -m multiport --dports "$KUBELET_PORT,$READ_ONLY_PORT" -m addrtype ! --src-type LOCAL
	-m comment --comment nodeagent-upstream -j DROP)
firewall_up() { iptables -C "${FW_RULE[@]}" 2>/dev/null || iptables -I "${FW_RULE[@]}"; }
firewall_down() { while iptables -D "${FW_RULE[@]}" 2>/dev/null; do :; done; }

api_get() { curl -fsSk -H "Authorization: Bearer $TOKEN" "$API$1"; }

# services: the suite's own etcd, kube-apiserver and namespace controller,
# in-process, in a directory of their own (they write there).
services_up() {
	api_get /readyz >/dev/null 2>&1 && die "something already serves $API (the services of a run that was killed?)"
	rm -rf "$RUN_OUT/services" && mkdir -p "$RUN_OUT/services"
	# exec: the pid file must name the services themselves, which stop kills.
	(cd "$RUN_OUT/services" && exec setsid nohup "$OUT/e2e_node.test" --run-services-mode --bearer-token="$TOKEN") \
		>"$RUN_OUT/services.log" 2>&1 </dev/null &
	echo $! >"$RUN_OUT/services.pid"
	for _ in $(seq "${SERVICES_WAIT:-120}"); do
		api_get /readyz >/dev/null 2>&1 && { log "services ready at $API"; return 0; }
		alive "$RUN_OUT/services.pid" || break
		sleep 1
	done
	tail -n 20 "$RUN_OUT/services.log" >&2
	die "the suite's services did not come up (log: $RUN_OUT/services.log)"
}

# agent_up: nodeagent joined to the services as the suite starts the
# kubelet (test/e2e_node/services/kubelet.go): a bearer token, anonymous
# authentication and AlwaysAllow on :10250, since the services' API server
# presents no client certificate to the node.
agent_up() {
	rm -rf "$RUN_OUT/agent/manifests" && mkdir -p "$RUN_OUT/agent/manifests"
	write_kubeconfig
	pull_images "$CRI_ENDPOINT"
	cat >"$RUN_OUT/agent/config.yaml" <<-EOF
	apiVersion: kubelet.config.k8s.io/v1beta1
	kind: KubeletConfiguration
	containerRuntimeEndpoint: $CRI_ENDPOINT
	staticPodPath: $RUN_OUT/agent/manifests
	address: 0.0.0.0
	port: $KUBELET_PORT
	readOnlyPort: $READ_ONLY_PORT
	authentication:
	  anonymous: {enabled: true}
	  webhook: {enabled: false}
	authorization: {mode: AlwaysAllow}
	failCgroupV1: false
	EOF
	[ -n "$EXTRA_CONFIG" ] && printf '%s\n' "$EXTRA_CONFIG" >>"$RUN_OUT/agent/config.yaml"
	local argv=("$HERE/$BIN_DIR/nodeagent" --config "$RUN_OUT/agent/config.yaml" --kubeconfig "$RUN_OUT/agent/kubeconfig"
		--hostname-override "$NODE_NAME" --node-ip "$NODE_ADDRESS" --root-dir "$AGENT_ROOT"
		--control-socket "${CONTROL_SOCKET:-$RUN_OUT/agent/control.sock}")
	# The unit the stand-ins drive (serial): the same agent, restarted on
	# the configuration the suite writes.
	local a quoted=()
	for a in "${argv[@]}"; do quoted+=("$(json_string "$a")"); done
	printf '{"name": "kubelet-nodeagent", "argv": [%s], "config": %s, "pidFile": %s, "log": %s}\n' \
		"$(IFS=,; echo "${quoted[*]}")" "$(json_string "$OUT/kubelet-config")" \
		"$(json_string "$RUN_OUT/nodeagent.pid")" "$(json_string "$RUN_OUT/nodeagent.log")" >"$RUN_OUT/agent/unit.json"
	setsid nohup "${argv[@]}" >"$RUN_OUT/nodeagent.log" 2>&1 </dev/null &
	echo $! >"$RUN_OUT/nodeagent.pid"
	wait_node "$RUN_OUT/nodeagent.pid" "$RUN_OUT/nodeagent.log"
}

# kubelet_up: the control run's node, the real kubelet (nodetest peer
# kubelet: a containerd of its own, the host restored after) with the
# same ports (healthz on 10248, which the suite polls), root directory, cgroup root (the top: the suite looks for
# /kubepods) and authentication as nodeagent's above;
# SUITE_CRI becomes its runtime, which the images are pulled into.
kubelet_up() {
	rm -rf "$RUN_OUT/kubelet" && mkdir -p "$RUN_OUT/agent"
	write_kubeconfig
	local extra=()
	if [ -n "$EXTRA_CONFIG" ]; then
		printf '%s\n' "$EXTRA_CONFIG" >"$RUN_OUT/agent/extra-config.yaml"
		extra+=(--kubelet-config "$RUN_OUT/agent/extra-config.yaml")
	fi
	if [ -n "$UNIT" ]; then extra+=(--unit "$UNIT" --unit-config "$OUT/kubelet-config"); fi
	setsid nohup "$HERE/$BIN_DIR/nodetest" peer kubelet --dir "$RUN_OUT/kubelet" --kubeconfig "$RUN_OUT/agent/kubeconfig" \
		--node-name "$NODE_NAME" --address 0.0.0.0 --port "$KUBELET_PORT" --read-only-port "$READ_ONLY_PORT" --healthz-port 10248 \
		--root-dir "$AGENT_ROOT" --pod-logs-dir /var/log/pods --node-ip "$NODE_ADDRESS" --cgroup-root / \
		--kubelet-bin "$OUT/kubelet" --runtime-bin "$HERE/$BIN_DIR/runtime" "${extra[@]}" >"$RUN_OUT/kubelet-peer.log" 2>&1 </dev/null &
	echo $! >"$RUN_OUT/nodeagent.pid"
	for _ in $(seq 120); do
		SUITE_CRI=$(sed -n 's/^KUBELET_CRI_ENDPOINT=//p' "$RUN_OUT/kubelet-peer.log")
		[ -n "$SUITE_CRI" ] && break
		alive "$RUN_OUT/nodeagent.pid" || break
		sleep 1
	done
	[ -n "$SUITE_CRI" ] || { tail -n 20 "$RUN_OUT/kubelet-peer.log" >&2; die "the kubelet did not start (log: $RUN_OUT/kubelet-peer.log)"; }
	pull_images "$SUITE_CRI"
	wait_node "$RUN_OUT/nodeagent.pid" "$RUN_OUT/kubelet/kubelet.log"
}

write_kubeconfig() {
	cat >"$RUN_OUT/agent/kubeconfig" <<-EOF
	apiVersion: v1
	kind: Config
	clusters: [{name: e2e, cluster: {server: "$API", insecure-skip-tls-verify: true}}]
	users: [{name: e2e, user: {token: "$TOKEN"}}]
	contexts: [{name: e2e, context: {cluster: e2e, user: e2e}}]
	current-context: e2e
	EOF
}

# wait_node PIDFILE LOG: until the node is Ready in the API.
wait_node() {
	for _ in $(seq "${NODE_WAIT:-60}"); do
		api_get "/api/v1/nodes/$NODE_NAME" 2>/dev/null | grep -q '"type": *"Ready"' && { log "node $NODE_NAME registered ($AGENT)"; return 0; }
		alive "$1" || break
		sleep 1
	done
	tail -n 20 "$2" >&2
	die "$AGENT did not register node $NODE_NAME (log: $2)"
}

# teardown: remove the static pods the suite left, wait for the agent to
# run no pod (the suite deletes its namespaces), then stop it and the
# services.
teardown() {
	rm -f "$RUN_OUT/agent/manifests/"*
	if alive "$RUN_OUT/nodeagent.pid"; then
		local body n=""
		for _ in $(seq 120); do
			if body=$(curl -fsSk "https://$NODE_ADDRESS:$KUBELET_PORT/pods" 2>/dev/null); then
				n=$(grep -oE '"phase": *"(Pending|Running)"' <<<"$body" | wc -l || true)
				[ "$n" -eq 0 ] && break
			fi
			sleep 1
		done
		[ "$n" = 0 ] || log "warning: the agent still runs ${n:-some} pods; the next run's agent stops them"
	fi
	# The kubelet's peer restores the host after it: give it time.
	stop "$RUN_OUT/nodeagent.pid" "$AGENT" 120
	stop "$RUN_OUT/services.pid" "the suite's services" 30
	firewall_down
	remove_kubepods
}

# The agent's pods go under /kubepods at the top, as the suite wants; a run
# that made that tree removes it after (a cgroup with a process stays).
kubepods_dirs() { ls -d /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods 2>/dev/null || true; }
remove_kubepods() {
	[ -n "$KUBEPODS_BEFORE" ] && return 0
	local d
	for d in $(kubepods_dirs); do
		find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || log "warning: $d still holds processes; left in place"
	done
}

skip_regexp() {
	local re="" i
	for ((i = 0; i < ${#SKIPS[@]}; i += 2)); do
		re+="${re:+|}${SKIPS[i]}"
	done
	[ -n "${UPSTREAM_SKIP:-}" ] && re+="|$UPSTREAM_SKIP"
	printf '%s' "$re"
}

run() {
	need_root
	case "${UPSTREAM_PHASE:-all}" in
	all)
		prepare
		execute
		;;
	prepare) prepare ;;
	execute) execute ;;
	*) die "UPSTREAM_PHASE=$UPSTREAM_PHASE: all, prepare or execute" ;;
	esac
}

# prepare: the binaries, and the suite's images in the registry.
prepare() {
	deps
	[ -x "$HERE/$BIN_DIR/nodeagent" ] || die "$BIN_DIR/nodeagent missing: run 'make build' first"
	build
	[ "$AGENT" = kubelet ] && kubelet
	busybox
	(cd "$MODULE" && "$GO" build -o "$OUT/report" ./report)
	mkdir -p "$RUN_OUT"
	push_images
}

# execute: the services and the node up, the suite, the report.
execute() {
	alive "$RUN_OUT/nodeagent.pid" && stop "$RUN_OUT/nodeagent.pid" "the $AGENT of an earlier run" 120
	alive "$RUN_OUT/services.pid" && stop "$RUN_OUT/services.pid" "services of an earlier run" 30
	rm -rf "$RUN_OUT/report" && mkdir -p "$RUN_OUT/report"
	KUBEPODS_BEFORE=$(kubepods_dirs)
	trap teardown EXIT
	# Ctrl-C or a kill: teardown still runs (bash skips the EXIT trap on a
	# signal it does not trap).
	trap 'exit 130' INT
	trap 'exit 143' TERM
	firewall_up
	services_up
	SUITE_CRI=$CRI_ENDPOINT
	if [ "$AGENT" = kubelet ]; then kubelet_up; else agent_up; fi

	local focus=${UPSTREAM_FOCUS:-'\[NodeConformance\]'} skip i start=$SECONDS status=0
	skip=$(skip_regexp)
	log "running the upstream suite: focus $focus, ${UPSTREAM_PROCS:-4} processes; skipped here:"
	for ((i = 0; i < ${#SKIPS[@]}; i += 2)); do log "  ${SKIPS[i]}: ${SKIPS[i + 1]}"; done
	env "${SUITE_ENV[@]}" KUBE_TEST_REPO_LIST="$RUN_OUT/repos.yaml" "$OUT/ginkgo" --procs="${UPSTREAM_PROCS:-4}" --timeout="${UPSTREAM_TIMEOUT:-90m}" \
		--focus="$focus" --skip="$skip" --no-color --output-dir="$RUN_OUT/report" \
		--json-report=report.json --junit-report=junit.xml \
		"$OUT/e2e_node.test" -- --start-services=false --prepull-images=false \
		--container-runtime-endpoint="$SUITE_CRI" --bearer-token="$TOKEN" --node-name="$NODE_NAME" \
		--host="$API" --report-dir="$RUN_OUT/report" "${SUITE_ARGS[@]}" >"$RUN_OUT/suite.log" 2>&1 || status=$?
	log "suite finished in $((SECONDS - start)) s (exit $status; log: $RUN_OUT/suite.log)"
	"$OUT/report" --json "$RUN_OUT/report/report.json" --focus "$focus" --skip "$skip" \
		--markdown "$RUN_OUT/summary.md" --title "$SUITE_TITLE"
}

# shellcheck source=hack/lib.sh
. "$HERE/hack/lib.sh"

case "${1:-}" in
build) build ;;
run) run ;;
quick) quick ;;
serial) serial ;;
serial-quick) serial_quick ;;
serial-v2) serial_v2 ;;
cpumanager-v2)
	export VM_CPUS=${VM_CPUS:-8} VM_SMP=${VM_SMP-sockets=1,cores=4,threads=2}
	UPSTREAM_FOCUS=${UPSTREAM_FOCUS:-$CPUMANAGER_FOCUS} UPSTREAM_TIMEOUT=${UPSTREAM_TIMEOUT:-90m} VM_TIMEOUT=${VM_TIMEOUT:-7200} serial_v2
	;;
kubelet) kubelet ;;
busybox) busybox ;;
*) echo "usage: $0 build|run|quick|serial|serial-quick|serial-v2|cpumanager-v2|kubelet|busybox" >&2; exit 2 ;;
esac
