# Sourced by the v2 VM's run scripts: start_containerd RUNTIME_DIR starts
# the host's containerd, runc and CNI plugins (RUNTIME_DIR, which make
# copies into the VM's work directory) with the project's configuration,
# the registry REGISTRY reached through the host's loopback at 10.0.2.2.
# The guest's root is 9p, where inotify sees nothing and overlayfs cannot
# put its upper layer: the runtime's state, its root (/var/lib/containerd,
# a tmpfs from the image's fstab) and the CNI directory containerd watches
# live in memory. Returns non-zero, with containerd's log, if it does not
# start. HOSTS_DIR names the registry hosts directory for ctr pulls.
HOSTS_DIR=/var/lib/nodeagent-runtime/certs.d

start_containerd() {
	runtime=$1
	mkdir -p /run/nodeagent-runtime /var/lib/nodeagent-runtime
	mount -t tmpfs tmpfs /var/lib/nodeagent-runtime
	REGISTRY=${REGISTRY:-127.0.0.1:5050}
	mkdir -p $HOSTS_DIR/$REGISTRY /var/lib/nodeagent-runtime/cni/net.d
	sed -e "s|@ROOT@|/var/lib/nodeagent-runtime|g" -e "s|@RUN@|/run/nodeagent-runtime|g" \
		-e "s|@PAUSE_IMAGE@|$PAUSE_IMAGE|g" -e "s|@RESTRICT_OOM@|false|g" -e "s|@RUNTIME_BIN@|$runtime|g" \
		/work/deploy/containerd/config.toml.in >/var/lib/nodeagent-runtime/containerd.toml
	sed -i 's|^root = .*|root = "/var/lib/containerd"|' /var/lib/nodeagent-runtime/containerd.toml
	printf 'server = "http://10.0.2.2:%s"\n[host."http://10.0.2.2:%s"]\n  capabilities = ["pull", "resolve"]\n' "${REGISTRY##*:}" "${REGISTRY##*:}" \
		>$HOSTS_DIR/$REGISTRY/hosts.toml
	PATH=$runtime:$PATH containerd --config /var/lib/nodeagent-runtime/containerd.toml >/var/log/containerd.log 2>&1 &
	for i in $(seq 100); do [ -S /run/nodeagent-runtime/containerd.sock ] && return 0; sleep 0.2; done
	tail -20 /var/log/containerd.log
	return 1
}
