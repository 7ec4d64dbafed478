#!/usr/bin/env bash
# The node's runtime for development and tests: a private containerd and a
# local image registry, both in the background, with the project's images.
#
#   hack/runtime.sh deps     install missing Debian packages
#   hack/runtime.sh build    containerd, runc and the CNI plugins (cached by version); prints their directory
#   hack/runtime.sh up       start registry + containerd, push images (idempotent)
#   hack/runtime.sh down     stop containerd and registry (pods keep running)
#   hack/runtime.sh status   say what is running
#   hack/runtime.sh supervise  (up runs it) containerd, restarted when it exits
#
# Settings come from the environment (the Makefile sets them all).
set -euo pipefail

ROOT_DIR=${RUNTIME_DIR:-/var/lib/nodeagent-runtime}
RUN_DIR=${RUNTIME_RUN_DIR:-/run/nodeagent-runtime}
REGISTRY=${REGISTRY:-127.0.0.1:5050}
PAUSE_IMAGE=${PAUSE_IMAGE:-$REGISTRY/nodeagent/pause:1.0}
TEST_IMAGE=${TEST_IMAGE:-$REGISTRY/nodeagent/test:latest}
BIN_DIR=${BIN_DIR:-bin}
NODE_ADDRESS=${NODE_ADDRESS:-198.18.0.1}
HOST_LINK=nodeagent-host
HERE=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}
CACHE=${RUNTIME_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodeagent}

# The node's runtime, built from these modules (the one place they are pinned).
CONTAINERD_VERSION=v2.4.2
RUNC_VERSION=v1.5.2
CNI_PLUGINS_VERSION=v1.10.0
RUNTIME_BIN=$CACHE/runtime-containerd-$CONTAINERD_VERSION-runc-$RUNC_VERSION-cni-$CNI_PLUGINS_VERSION

# systemd: systemd-analyze checks the service unit in the tests (not run as PID 1).
# libseccomp-dev, pkg-config, gcc: runc is built with cgo and seccomp.
# earlyoom: the userspace OOM daemon experiments and make bench compare with.
PACKAGES=(earlyoom docker-registry busybox-static iptables iproute2 curl systemd libseccomp-dev pkg-config gcc libc6-dev)

log() { printf 'runtime: %s\n' "$*" >&2; }
die() { printf 'runtime: error: %s\n' "$*" >&2; exit 1; }

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (containerd, cgroups and CNI need it)"; }

deps() {
	need_root
	apt_need "${PACKAGES[@]}"
}

# shellcheck source=hack/lib.sh
. "$HERE/hack/lib.sh"

# module_dir MODULE@VERSION: the module's sources in the Go module cache.
module_dir() {
	local dir
	dir=$($GO mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	[ -n "$dir" ] || die "cannot download the Go module $1 (go mod download -json $1)"
	echo "$dir"
}

# build: containerd, ctr and the runc shim (pure Go), runc (cgo with
# libseccomp: without seccomp a pod with a seccomp profile fails), and the
# CNI plugins the agent's bridge network uses, into RUNTIME_BIN. Cached by
# version; a partial build never replaces a whole one.
build() {
	if [ -x "$RUNTIME_BIN/containerd" ] && [ -x "$RUNTIME_BIN/runc" ] && [ -x "$RUNTIME_BIN/cni/bridge" ]; then
		echo "$RUNTIME_BIN"
		return 0
	fi
	pkg-config --exists libseccomp 2>/dev/null || die "runc needs libseccomp's headers: install the Debian package libseccomp-dev (and pkg-config), or run 'make deps'"
	command -v gcc >/dev/null || die "runc needs a C compiler: install the Debian package gcc"
	local tmp=$RUNTIME_BIN.tmp start=$SECONDS dir
	rm -rf "$tmp" && mkdir -p "$tmp/cni"
	trap 'rm -rf "$tmp"' EXIT
	log "building containerd $CONTAINERD_VERSION, runc $RUNC_VERSION and CNI plugins $CNI_PLUGINS_VERSION (cold: about 3 minutes on 2 cores)"
	dir=$(module_dir "github.com/containerd/containerd/v2@$CONTAINERD_VERSION")
	local ver="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
	(cd "$dir" && CGO_ENABLED=0 $GO build -trimpath -tags urfave_cli_no_docs -ldflags "$ver" -o "$tmp/" ./cmd/containerd ./cmd/ctr &&
		CGO_ENABLED=0 $GO build -trimpath -tags "urfave_cli_no_docs no_grpc" -ldflags "$ver" -o "$tmp/" ./cmd/containerd-shim-runc-v2) ||
		die "building containerd $CONTAINERD_VERSION failed"
	dir=$(module_dir "github.com/opencontainers/runc@$RUNC_VERSION")
	(cd "$dir" && CGO_ENABLED=1 $GO build -trimpath -buildmode=pie -tags "seccomp urfave_cli_no_docs" -ldflags "-s -w" -o "$tmp/runc" .) ||
		die "building runc $RUNC_VERSION failed (it needs gcc and libseccomp-dev)"
	dir=$(module_dir "github.com/containernetworking/plugins@$CNI_PLUGINS_VERSION")
	(cd "$dir" && CGO_ENABLED=0 $GO build -trimpath -ldflags "-s -w" -o "$tmp/cni/" ./plugins/main/bridge ./plugins/main/loopback ./plugins/ipam/host-local ./plugins/meta/portmap) ||
		die "building the CNI plugins $CNI_PLUGINS_VERSION failed"
	rm -rf "$RUNTIME_BIN" && mv "$tmp" "$RUNTIME_BIN"
	trap - EXIT
	log "built in $((SECONDS - start)) s: $RUNTIME_BIN"
	echo "$RUNTIME_BIN"
}

# render TEMPLATE OUT: fill @VARS@ in a template.
render() {
	sed -e "s|@ROOT@|$ROOT_DIR|g" -e "s|@RUN@|$RUN_DIR|g" -e "s|@REGISTRY@|$REGISTRY|g" \
		-e "s|@PAUSE_IMAGE@|$PAUSE_IMAGE|g" -e "s|@RESTRICT_OOM@|$(restrict_oom)|g" -e "s|@RUNTIME_BIN@|$RUNTIME_BIN|g" "$1" >"$2"
}

# restrict_oom: "true" when this host refuses to lower oom_score_adj below the
# current value (no CAP_SYS_RESOURCE), as containerd would hit on every sandbox.
restrict_oom() {
	if sh -c 'echo -999 > /proc/self/oom_score_adj' 2>/dev/null; then echo false; else echo true; fi
}

registry_up() {
	mkdir -p "$ROOT_DIR/registry" "$RUN_DIR" "$ROOT_DIR/logs"
	render "$HERE/deploy/containerd/registry.yml.in" "$ROOT_DIR/registry.yml.new"
	if alive "$RUN_DIR/registry.pid" && ! cmp -s "$ROOT_DIR/registry.yml.new" "$ROOT_DIR/registry.yml"; then
		log "registry config changed (now $REGISTRY); restarting the registry"
		stop "$RUN_DIR/registry.pid" registry
	fi
	mv "$ROOT_DIR/registry.yml.new" "$ROOT_DIR/registry.yml"
	local attempt
	for attempt in 1 2; do
		if ! alive "$RUN_DIR/registry.pid"; then
			log "starting registry on $REGISTRY"
			setsid nohup docker-registry serve "$ROOT_DIR/registry.yml" >>"$ROOT_DIR/logs/registry.log" 2>&1 </dev/null &
			echo $! >"$RUN_DIR/registry.pid"
		fi
		for _ in $(seq 100); do
			curl -fsS "http://$REGISTRY/v2/" >/dev/null 2>&1 && return 0
			alive "$RUN_DIR/registry.pid" || break
			sleep 0.1
		done
		# One that runs but does not answer (stopped, or another program's
		# pid) is started afresh once.
		if [ "$attempt" = 1 ]; then stop "$RUN_DIR/registry.pid" "the registry, which does not answer"; fi
	done
	tail -n 20 "$ROOT_DIR/logs/registry.log" >&2 || true
	die "registry did not come up on $REGISTRY (log: $ROOT_DIR/logs/registry.log)"
}

containerd_up() {
	mkdir -p "$ROOT_DIR/containerd2" "$ROOT_DIR/cni/net.d" "$ROOT_DIR/certs.d/$REGISTRY" "$RUN_DIR" "$ROOT_DIR/logs"
	render "$HERE/deploy/containerd/hosts.toml.in" "$ROOT_DIR/certs.d/$REGISTRY/hosts.toml"
	render "$HERE/deploy/containerd/config.toml.in" "$ROOT_DIR/containerd.toml.new"
	if alive "$RUN_DIR/containerd.pid" && ! cmp -s "$ROOT_DIR/containerd.toml.new" "$ROOT_DIR/containerd.toml"; then
		log "containerd config changed; restarting containerd (running pods are kept)"
		containerd_down
	fi
	if alive "$RUN_DIR/containerd.pid" && ! alive "$RUN_DIR/supervisor.pid"; then
		log "containerd runs unsupervised (an older runtime-up); restarting it under a supervisor (running pods are kept)"
		containerd_down
	fi
	mv "$ROOT_DIR/containerd.toml.new" "$ROOT_DIR/containerd.toml"
	if ! alive "$RUN_DIR/supervisor.pid"; then
		log "starting containerd (socket $RUN_DIR/containerd.sock), restarted whenever it exits"
		rm -f "$RUN_DIR/containerd.pid"
		setsid nohup "$HERE/hack/runtime.sh" supervise >>"$ROOT_DIR/logs/containerd.log" 2>&1 </dev/null &
		echo $! >"$RUN_DIR/supervisor.pid"
	fi
	for _ in $(seq 300); do
		"$RUNTIME_BIN/ctr" --address "$RUN_DIR/containerd.sock" version >/dev/null 2>&1 && return 0
		alive "$RUN_DIR/supervisor.pid" || break
		sleep 0.1
	done
	tail -n 20 "$ROOT_DIR/logs/containerd.log" >&2 || true
	containerd_down
	die "containerd did not come up (log: $ROOT_DIR/logs/containerd.log)"
}

# supervise: containerd in the foreground, started again a second after it
# exits, as a systemd unit with Restart=always would (the upstream Restart
# specs SIGKILL it and expect it back); the supervisor's SIGTERM stops it.
supervise() {
	local child="" code
	# Every child of the supervisor (a containerd started just before the
	# signal too); the shims are not its children.
	trap 'pkill -TERM -P $$ 2>/dev/null; wait 2>/dev/null; rm -f "$RUN_DIR/containerd.pid"; exit 0' TERM INT
	while :; do
		"$RUNTIME_BIN/containerd" --config "$ROOT_DIR/containerd.toml" </dev/null &
		child=$!
		echo "$child" >"$RUN_DIR/containerd.pid"
		wait "$child" && code=0 || code=$?
		log "containerd (pid $child) exited with status $code; starting it again in 1 s"
		sleep 1
	done
}

# containerd_down: the supervisor, then containerd (one started by an
# older runtime-up has no supervisor).
containerd_down() {
	stop "$RUN_DIR/supervisor.pid" "containerd's supervisor" 20
	stop "$RUN_DIR/containerd.pid" containerd
}

push_images() {
	[ -x "$BIN_DIR/imagetool" ] || die "$BIN_DIR/imagetool missing: run 'make images' first"
	log "pushing images to $REGISTRY"
	"$BIN_DIR/imagetool" --push --pause-bin "$BIN_DIR/images/pause" \
		--helpers "$BIN_DIR/images/memhog,$BIN_DIR/images/probe-server" \
		--pause-image "$PAUSE_IMAGE" --test-image "$TEST_IMAGE" >&2
}

# refresh_images: containerd keeps the image it holds under a tag, and
# pods would run an older build of the pause or test image: pull them
# again (quick when unchanged).
refresh_images() {
	local ref out
	for ref in "$PAUSE_IMAGE" "$TEST_IMAGE"; do
		out=$("$RUNTIME_BIN/ctr" --address "$RUN_DIR/containerd.sock" --namespace k8s.io images pull --plain-http "$ref" 2>&1) ||
			{ printf '%s\n' "$out" | tail -n 5 >&2; die "pull $ref into containerd (log: $ROOT_DIR/logs/containerd.log)"; }
	done
}

# host_address gives the node an address of its own for the cluster
# tests: the API server refuses to proxy to loopback (node proxy, exec,
# logs), and traffic must stay on this machine. A dummy interface holds
# one address of the benchmarking range (RFC 2544), local only: a bridge
# without ports (the kernel here has no dummy links).
host_address() {
	ip link show "$HOST_LINK" >/dev/null 2>&1 || ip link add "$HOST_LINK" type bridge
	ip -4 addr show dev "$HOST_LINK" | grep -q " ${NODE_ADDRESS}/" || ip addr add "$NODE_ADDRESS/32" dev "$HOST_LINK"
	ip link set "$HOST_LINK" up
}

up() {
	need_root
	build >/dev/null
	# bin/runtime: the binaries in use, for the scripts and the v2 VM lane.
	mkdir -p "$HERE/$BIN_DIR" && ln -sfn "$RUNTIME_BIN" "$HERE/$BIN_DIR/runtime"
	host_address
	registry_up
	push_images
	containerd_up
	refresh_images
	echo "CRI_ENDPOINT=unix://$RUN_DIR/containerd.sock"
	echo "NODE_ADDRESS=$NODE_ADDRESS"
}

down() {
	containerd_down
	stop "$RUN_DIR/registry.pid" registry
}

status() {
	alive "$RUN_DIR/registry.pid" && echo "registry: running (pid $(cat "$RUN_DIR/registry.pid"), $REGISTRY)" || echo "registry: stopped"
	alive "$RUN_DIR/containerd.pid" && echo "containerd: running (pid $(cat "$RUN_DIR/containerd.pid"), unix://$RUN_DIR/containerd.sock, $("$RUNTIME_BIN/containerd" --version | cut -d' ' -f3), runc $RUNC_VERSION)" || echo "containerd: stopped"
	ip -4 addr show dev "$HOST_LINK" 2>/dev/null | grep -q " ${NODE_ADDRESS}/" && echo "node address: $NODE_ADDRESS ($HOST_LINK)" || echo "node address: missing"
}

case "${1:-}" in
deps) deps ;;
build) build ;;
up) up ;;
down) down ;;
status) status ;;
supervise) supervise ;;
*) echo "usage: $0 deps|build|up|down|status" >&2; exit 2 ;;
esac
