#!/bin/sh
# The upstream serial specs that need systemd as PID 1, logind and a system
# bus (GracefulNodeShutdown), run inside the v2 VM from /work, which
# `hack/upstream.sh serial-v2` laid out as this tree: the suite, its
# services (etcd, kube-apiserver) and nodeagent all run here, the specs
# restart the agent through the stand-ins and emit logind's
# PrepareForShutdown on this bus. Exits with the suite's status.
set -u
W=/work
export HOME=${HOME:-/root} # a systemd service has none; the script names its cache by it
. $W/containerd.sh

# The agent writes logind's InhibitDelayMaxSec drop-in into the image's
# /etc (9p, kept between boots): none before, none after.
DROP_IN=/etc/systemd/logind.conf.d/99-kubelet.conf
reset_logind() {
	rm -f $DROP_IN
	systemctl kill -s HUP systemd-logind 2>/dev/null || true
}
reset_logind
trap reset_logind EXIT

start_containerd $W/bin/runtime || { echo "upstream: error: containerd did not start"; exit 1; }
# The agent's root: 9p has no inotify and takes no tmpfs mounts below it.
mkdir -p /var/lib/kubelet && mount -t tmpfs -o size=1g tmpfs /var/lib/kubelet

# TCG runs the services and the agent several times slower than the host.
# 9p takes no sockets either: the agent's control socket is under /run.
mkdir -p /run/nodeagent-upstream
UPSTREAM_PHASE=execute NODE_ADDRESS=10.0.2.15 HOSTS_DIR=$HOSTS_DIR CONTROL_SOCKET=/run/nodeagent-upstream/control.sock \
	CRI_ENDPOINT=unix:///run/nodeagent-runtime/containerd.sock SERVICES_WAIT=600 NODE_WAIT=300 \
	$W/hack/upstream.sh serial
