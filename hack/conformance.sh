#!/usr/bin/env bash
# make conformance: start an agent on the local node (its own cgroup root,
# port and manifest directory), run `nodectl conformance` against it, stop
# it. Extra arguments go to nodectl conformance (--focus, --junit, ...).
# Environment: BIN_DIR, CRI_ENDPOINT, TEST_IMAGE, CONFORMANCE_DIR,
# CONFORMANCE_PORT.
set -euo pipefail

bin_dir=${BIN_DIR:-bin}
endpoint=${CRI_ENDPOINT:?CRI_ENDPOINT is not set}
image=${TEST_IMAGE:-127.0.0.1:5000/nodeagent/test:latest}
dir=${CONFORMANCE_DIR:-$bin_dir/conformance}
port=${CONFORMANCE_PORT:-10355}

log() { printf 'conformance: %s\n' "$*" >&2; }

mkdir -p "$dir/manifests" "$dir/logs" "$dir/root" "$dir/run"
dir=$(cd "$dir" && pwd)
rm -f "$dir"/manifests/conformance-*.yaml
cat >"$dir/config.yaml" <<CONFIG
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: $endpoint
staticPodPath: $dir/manifests
podLogsDir: $dir/logs
cgroupRoot: /nodeagent-conformance
readOnlyPort: $port
fileCheckFrequency: 2s
CONFIG

"$bin_dir/nodeagent" --config "$dir/config.yaml" --hostname-override conformance --root-dir "$dir/root" \
	--control-socket "$dir/run/control.sock" >"$dir/agent.log" 2>&1 &
agent=$!
stop_agent() {
	kill -TERM "$agent" 2>/dev/null && wait "$agent" 2>/dev/null || true
}
trap stop_agent EXIT
for _ in $(seq 1 60); do
	curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
	kill -0 "$agent" 2>/dev/null || { cat "$dir/agent.log" >&2; log "the agent did not start"; exit 1; }
	sleep 0.5
done
log "agent up on 127.0.0.1:$port (log $dir/agent.log)"
"$bin_dir/nodectl" conformance --server "http://127.0.0.1:$port" --control-socket "$dir/run/control.sock" --image "$image" "$@"
