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
GO=${GO:-go}
CACHE=${CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodeagent}
MODULE=$HERE/hack/controlplane

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { printf 'cluster: error: %s\n' "$*" >&2; exit 1; }

# version: the k8s.io/kubernetes release the module builds.
version() { awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$MODULE/go.mod"; }

build() {
	local ver key cached
	ver=$(version)
	[ -n "$ver" ] || die "no k8s.io/kubernetes requirement in $MODULE/go.mod"
	key=$(cd "$MODULE" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-12)
	cached=$CACHE/controlplane-$ver-$key
	if [ ! -x "$cached" ]; then
		log "building the control plane from k8s.io/kubernetes $ver (cold: about 5 minutes on 2 cores)"
		mkdir -p "$CACHE"
		local start=$SECONDS
		(cd "$MODULE" && $GO build -trimpath -ldflags '-s -w' -o "$cached.tmp" .)
		mv "$cached.tmp" "$cached"
		log "built in $((SECONDS - start)) s: $cached"
	fi
	mkdir -p "$HERE/$BIN_DIR"
	ln -f "$cached" "$HERE/$BIN_DIR/controlplane" 2>/dev/null || cp "$cached" "$HERE/$BIN_DIR/controlplane"
	# One binary: run as kubectl, it is kubectl.
	ln -sf controlplane "$HERE/$BIN_DIR/kubectl"
}

case "${1:-}" in
build) build ;;
*) echo "usage: $0 build|up|down|status" >&2; exit 2 ;;
esac
