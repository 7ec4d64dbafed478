#!/usr/bin/env bash
# A local Kubernetes cluster with nodeagent as its node.
#
#   hack/cluster.sh build    bin/controlplane and bin/kubectl (cached by version)
#   hack/cluster.sh up       control plane + nodeagent joined to it (idempotent)
#   hack/cluster.sh down     stop both; the agent's pods are removed
#   hack/cluster.sh status   say what is running
#
# The control plane is hack/controlplane, its own Go module (it requires
# k8s.io/kubernetes, which the agent's go.mod never does). A cold build
# takes about 5 minutes on 2 cores; the binary is cached under
# CONTROLPLANE_CACHE keyed by the Kubernetes version and a hash of the
# module's sources, so a fresh clone reuses it.
set -euo pipefail

HERE=$(cd "$(dirname "$0")/.." && pwd)
BIN_DIR=${BIN_DIR:-bin}
BIN=$HERE/$BIN_DIR
GO=${GO:-go}
CACHE=${CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodeagent}
MODULE=$HERE/hack/controlplane
DIR=${CLUSTER_DIR:-/var/lib/nodeagent-cluster}
PORT=${CLUSTER_PORT:-6443}
NODE=${NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}
CRI_ENDPOINT=${CRI_ENDPOINT:-unix:///run/nodeagent-runtime/containerd.sock}
NODE_ADDRESS=${NODE_ADDRESS:-198.18.0.1}
# The pods' range; the controller manager gives each node a /24 of it.
CLUSTER_CIDR=${CLUSTER_CIDR:-10.88.0.0/16}
ADMIN=$DIR/admin.kubeconfig

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { printf 'cluster: error: %s\n' "$*" >&2; exit 1; }


build() {
	local ver key cached
	ver=$(k8s_version "$MODULE")
	[ -n "$ver" ] || die "no k8s.io/kubernetes requirement in $MODULE/go.mod"
	key=$(cd "$MODULE" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-12)
	cached=$CACHE/controlplane-$ver-$key
	if [ ! -x "$cached" ]; then
		log "building the control plane from k8s.io/kubernetes $ver (cold: about 5 minutes on 2 cores)"
		mkdir -p "$CACHE"
		local start=$SECONDS
		# The release's version, as its own build stamps it (kubectl version,
		# /version): without it the components say v0.0.0-master.
		local minor=${ver#v1.}
		minor=${minor%%.*}
		local v=k8s.io/component-base/version
		(cd "$MODULE" && $GO build -trimpath -ldflags "-s -w -X $v.gitVersion=$ver -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean" -o "$cached.tmp" .)
		mv "$cached.tmp" "$cached"
		log "built in $((SECONDS - start)) s: $cached"
	fi
	mkdir -p "$HERE/$BIN_DIR"
	ln -f "$cached" "$HERE/$BIN_DIR/controlplane" 2>/dev/null || cp "$cached" "$HERE/$BIN_DIR/controlplane"
	# One binary: run as kubectl, it is kubectl.
	ln -sf controlplane "$HERE/$BIN_DIR/kubectl"
}

# shellcheck source=hack/lib.sh
. "$HERE/hack/lib.sh"

kubectl() { "$BIN/kubectl" --kubeconfig "$ADMIN" "$@"; }

# poll SECONDS PIDFILE CMD...: true once CMD succeeds, polled every half
# second for up to SECONDS; false at once when PIDFILE's process is gone.
poll() {
	local i tries=$(($1 * 2)) pidfile=$2
	shift 2
	for ((i = 0; i < tries; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		alive "$pidfile" || return 1
		sleep 0.5
	done
	return 1
}

api_ready() { [ -f "$ADMIN" ] && kubectl get --raw /readyz; }

up() {
	[ "$(id -u)" = 0 ] || die "must run as root (the agent needs containerd, cgroups and CNI)"
	[ -x "$BIN/nodeagent" ] && [ -x "$BIN/controlplane" ] || die "run 'make build' and 'hack/cluster.sh build' first"
	mkdir -p "$DIR/logs" "$DIR/manifests"
	if ! alive "$DIR/controlplane.pid"; then
		log "starting the control plane on https://127.0.0.1:$PORT (state in $DIR)"
		setsid nohup "$BIN/controlplane" run --dir "$DIR" --port "$PORT" --advertise-address "$NODE_ADDRESS" --cluster-cidr "$CLUSTER_CIDR" \
			>>"$DIR/logs/controlplane.log" 2>&1 </dev/null &
		echo $! >"$DIR/controlplane.pid"
	fi
	poll 120 "$DIR/controlplane.pid" api_ready || { tail -n 20 "$DIR/logs/controlplane.log" >&2; die "the API server did not become ready (log: $DIR/logs/controlplane.log)"; }

	"$BIN/controlplane" kubeconfig --dir "$DIR" --node "$NODE" --out "$DIR/node.kubeconfig"
	cp "$HERE"/examples/pods/*.yaml "$DIR/manifests/"
	# The node listens on, and is reached at, the local address runtime-up
	# made; the API server's client certificate is signed by the cluster CA.
	sed -e "s|@CRI_ENDPOINT@|$CRI_ENDPOINT|" -e "s|@MANIFESTS@|$DIR/manifests|" \
		-e "s|^address: .*|address: $NODE_ADDRESS|" -e "s|clientCAFile: .*|clientCAFile: $DIR/pki/ca.crt|" -e "$(cgroup_v1_config)" \
		"$HERE/examples/nodeagent.yaml" >"$DIR/nodeagent.yaml"
	if ! alive "$DIR/nodeagent.pid"; then
		log "starting nodeagent as node $NODE (log: $DIR/logs/nodeagent.log)"
		setsid nohup "$BIN/nodeagent" --config "$DIR/nodeagent.yaml" --kubeconfig "$DIR/node.kubeconfig" \
			--hostname-override "$NODE" --node-ip "$NODE_ADDRESS" --root-dir "$DIR/agent" >>"$DIR/logs/nodeagent.log" 2>&1 </dev/null &
		echo $! >"$DIR/nodeagent.pid"
	fi
	# kubectl wait fails at once on a Node not registered yet: wait for
	# the Node first, then for it to be Ready.
	if ! poll 120 "$DIR/nodeagent.pid" kubectl get node "$NODE" || ! kubectl wait --for=condition=Ready "node/$NODE" --timeout=120s >/dev/null; then
		tail -n 20 "$DIR/logs/nodeagent.log" >&2
		die "node $NODE did not become Ready (log: $DIR/logs/nodeagent.log)"
	fi
	# down cordoned it; the Node object outlives the agent in the state dir.
	kubectl uncordon "$NODE" >/dev/null
	# Pods need their namespace's default service account, which the
	# controller manager makes a moment after the API comes up.
	poll 60 "$DIR/controlplane.pid" kubectl get serviceaccount default -n default || die "the default service account did not appear (log: $DIR/logs/controlplane.log)"
	log "node $NODE is Ready; try: $BIN_DIR/kubectl get nodes"
	echo "KUBECONFIG=$ADMIN"
}

# down drains the node (its pods stop with their grace periods, static
# pods too), then stops the agent and the control plane.
down() {
	if alive "$DIR/nodeagent.pid" && alive "$DIR/controlplane.pid"; then
		log "draining node $NODE"
		rm -f "$DIR"/manifests/*
		kubectl drain "$NODE" --ignore-daemonsets --delete-emptydir-data --force --disable-eviction --timeout=120s >/dev/null 2>&1 ||
			log "drain did not finish; stopping anyway"
		for _ in $(seq 120); do
			[ "$(curl -fsS http://127.0.0.1:10255/pods 2>/dev/null | grep -c '"uid"')" = 0 ] && break
			sleep 1
		done
	fi
	stop "$DIR/nodeagent.pid" nodeagent 30
	stop "$DIR/controlplane.pid" "control plane" 30
}

status() {
	alive "$DIR/controlplane.pid" && echo "control plane: running (pid $(cat "$DIR/controlplane.pid"), https://127.0.0.1:$PORT, KUBECONFIG=$ADMIN)" || echo "control plane: stopped"
	alive "$DIR/nodeagent.pid" && echo "nodeagent: running (pid $(cat "$DIR/nodeagent.pid"), node $NODE)" || echo "nodeagent: stopped"
}

case "${1:-}" in
build) build ;;
up) up ;;
down) down ;;
status) status ;;
*) echo "usage: $0 build|up|down|status" >&2; exit 2 ;;
esac
