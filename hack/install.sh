#!/usr/bin/env bash
# make install / make uninstall: the agent as a service on a worker host.
#   hack/install.sh install|uninstall
# Environment: DESTDIR (staging root, default /), PREFIX (default
# /usr/local), BIN_DIR (built binaries), INSTALL_CRI_ENDPOINT (the runtime
# the default config points at).
set -euo pipefail

cmd=${1:-}
root=${DESTDIR:-}
prefix=${PREFIX:-/usr/local}
bin_dir=${BIN_DIR:-bin}
endpoint=${INSTALL_CRI_ENDPOINT:-unix:///run/containerd/containerd.sock}

bindir=$root$prefix/bin
unit=$root/etc/systemd/system/nodeagent.service
confdir=$root/etc/nodeagent
config=$confdir/config.yaml
# What install wrote, so uninstall can tell an untouched config from a
# changed one whatever INSTALL_CRI_ENDPOINT was then.
config_sum=$confdir/.config.yaml.installed.sha256
docdir=$root$prefix/share/doc/nodeagent

say() { echo "$cmd: $*"; }
die() { echo "$cmd: $*" >&2; exit 1; }
# systemd is running as PID 1 and the install goes to the live system.
live_systemd() { [ -z "$root" ] && [ -d /run/systemd/system ]; }

# The default config: the checked-in example, pointed at the host's
# runtime and /etc/nodeagent/manifests.
default_config() {
	sed -e "s|@CRI_ENDPOINT@|$endpoint|" -e "s|@MANIFESTS@|/etc/nodeagent/manifests|" examples/nodeagent.yaml
}

# Writing to the live system needs root; say so before any file moves.
need_root() {
	[ -n "$root" ] || [ "$(id -u)" = 0 ] || die "installing into / needs root (or set DESTDIR to stage it)"
}

install_all() {
	need_root
	for b in nodeagent nodectl nodetest; do
		[ -x "$bin_dir/$b" ] || die "$bin_dir/$b is missing: run make build first"
	done
	install -D -m 0755 "$bin_dir/nodeagent" "$bindir/nodeagent"
	install -D -m 0755 "$bin_dir/nodectl" "$bindir/nodectl"
	install -D -m 0755 "$bin_dir/nodetest" "$bindir/nodetest"
	say "binaries in $bindir"
	mkdir -p "$(dirname "$unit")"
	sed -e "s|/usr/local/bin/nodeagent|$prefix/bin/nodeagent|" \
		-e "s|file:///usr/share/doc/nodeagent|file://$prefix/share/doc/nodeagent|" \
		deploy/systemd/nodeagent.service >"$unit.tmp"
	chmod 0644 "$unit.tmp" && mv "$unit.tmp" "$unit"
	say "unit $unit"
	# The unit's Documentation= points at the README, which links docs/.
	install -D -m 0644 README.md "$docdir/README.md"
	for page in docs/*.md; do
		install -D -m 0644 "$page" "$docdir/$page"
	done
	mkdir -p "$confdir/manifests"
	if [ -e "$config" ]; then
		say "kept the existing $config"
	else
		default_config >"$config.tmp" && chmod 0644 "$config.tmp" && mv "$config.tmp" "$config"
		sha256sum <"$config" >"$config_sum"
		say "default config $config (runtime $endpoint)"
	fi
	"$bindir/nodeagent" --validate-config "$config" >/dev/null ||
		die "$config does not validate: fix it, then start the service"
	if live_systemd; then
		systemctl daemon-reload
		say "start it with: systemctl enable --now nodeagent"
	else
		say "start it with the unit's ExecStart line, or under systemd: systemctl enable --now nodeagent"
	fi
}

uninstall_all() {
	need_root
	if live_systemd && { systemctl is-active --quiet nodeagent || systemctl is-enabled --quiet nodeagent; }; then
		die "nodeagent.service is running or enabled: systemctl disable --now nodeagent first (pods keep running)"
	fi
	rm -f "$bindir/nodeagent" "$bindir/nodectl" "$bindir/nodetest" "$unit"
	rm -rf "$docdir"
	if [ -e "$config" ]; then
		if [ -e "$config_sum" ] && sha256sum <"$config" | cmp -s - "$config_sum"; then
			rm -f "$config" "$config_sum"
		elif [ ! -e "$config_sum" ] && default_config | cmp -s - "$config"; then
			rm -f "$config"
		else
			say "kept $config: it was changed after install (remove it by hand)"
		fi
	fi
	[ -e "$config" ] || rm -f "$config_sum"
	rmdir "$confdir/manifests" 2>/dev/null || [ ! -d "$confdir/manifests" ] || say "kept $confdir/manifests: it holds manifests"
	rmdir "$confdir" 2>/dev/null || true
	live_systemd && systemctl daemon-reload
	say "removed; the agent's state in /var/lib/nodeagent and running pods were left alone"
}

case $cmd in
install) install_all ;;
uninstall) uninstall_all ;;
*) die "usage: $0 install|uninstall" ;;
esac
