#!/usr/bin/env bash
# The upstream Kubernetes node e2e suite (k8s.io/kubernetes/test/e2e_node)
# against nodeagent.
#
#   hack/upstream.sh build   build bin/upstream/{e2e_node.test,ginkgo,agnhost}
#                            (cached by release and module hash)
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

# shellcheck source=hack/lib.sh
. "$HERE/hack/lib.sh"

case "${1:-}" in
build) build ;;
*) echo "usage: $0 build" >&2; exit 2 ;;
esac
