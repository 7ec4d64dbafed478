#!/usr/bin/env bash
# The cgroup v2 test VM: Debian bookworm with systemd as PID 1 on the
# unified hierarchy, under qemu's software emulation (TCG; KVM does not work
# on these hosts). The root filesystem is a directory shared over 9p, so no
# disk image is built; it is cached under $VM_CACHE and rebuilt only when
# its inputs (package list, kernel, this recipe's version) change.
#
#   hack/vm.sh deps        install qemu, debootstrap, kmod, cpio
#   hack/vm.sh image       build or reuse the cached root fs, kernel, initramfs
#   hack/vm.sh run DIR     boot with DIR shared at /work in the guest; the guest
#                          runs /work/run.sh once, writes its exit code to
#                          /work/result and powers off; the serial console goes
#                          to DIR/console.log. Exits with run.sh's code.
set -euo pipefail

VM_CACHE=${VM_CACHE:-/var/cache/nodeagent-vm}
VM_MEMORY=${VM_MEMORY:-3072}
VM_CPUS=${VM_CPUS:-2}
# VM_SMP: qemu's CPU topology beside the count, e.g. sockets=1,cores=4,threads=2
# (SMT siblings for the CPU manager specs); empty: qemu's default. With it
# the guest is told an Intel vendor id: under an AMD one TCG shows no
# sibling threads (it has no topoext).
VM_SMP=${VM_SMP:-}
VM_TIMEOUT=${VM_TIMEOUT:-1200}
MIRROR=${VM_MIRROR:-http://deb.debian.org/debian}
# Bump when the recipe below changes what ends up in the image.
RECIPE=4
PACKAGES=systemd,systemd-sysv,udev,dbus,containerd,runc,containernetworking-plugins,iptables,iproute2,kmod,procps,ca-certificates,busybox-static,curl
# Modules the initramfs loads to mount the 9p root, in dependency order.
MODULES="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p"

log() { printf 'vm: %s\n' "$*" >&2; }
die() { printf 'vm: error: %s\n' "$*" >&2; exit 1; }

deps() {
	[ "$(id -u)" = 0 ] || die "must run as root"
	apt_need qemu-system-x86 debootstrap kmod cpio
}

# kernel_package: the newest Debian 6.1 kernel image package on offer.
kernel_package() {
	apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' | awk '{print $1}' | sort -V | tail -n 1
}

image_dir() {
	local kpkg=$1
	printf '%s/%s\n' "$VM_CACHE" "$(printf '%s|%s|%s' "$RECIPE" "$PACKAGES" "$kpkg" | sha256sum | cut -c1-16)"
}

image() {
	deps
	local kpkg; kpkg=$(kernel_package)
	[ -n "$kpkg" ] || die "no linux-image-6.1.0-*-amd64 package in the apt sources"
	local dir; dir=$(image_dir "$kpkg")
	if [ -f "$dir/ready" ]; then
		echo "$dir"
		return 0
	fi
	log "building the VM image in $dir (kernel $kpkg); this takes a few minutes"
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp"
	local t0=$SECONDS
	debootstrap --variant=minbase --include="$PACKAGES" bookworm "$dir.tmp/rootfs" "$MIRROR" >"$dir.tmp/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$dir.tmp/debootstrap.log" >&2; die "debootstrap failed (log: $dir.tmp/debootstrap.log)"; }
	log "root fs ready after $((SECONDS - t0)) s"

	mkdir -p "$dir.tmp/kernel"
	(cd "$dir.tmp/kernel" && apt-get download "$kpkg" >/dev/null 2>&1) || die "apt-get download $kpkg failed"
	dpkg-deb -x "$dir.tmp"/kernel/*.deb "$dir.tmp/kernel/x"
	local kver; kver=$(ls "$dir.tmp/kernel/x/lib/modules")
	cp "$dir.tmp/kernel/x/boot/vmlinuz-$kver" "$dir.tmp/vmlinuz"
	mkdir -p "$dir.tmp/rootfs/lib/modules"
	cp -a "$dir.tmp/kernel/x/lib/modules/$kver" "$dir.tmp/rootfs/lib/modules/"
	# The kernel's configuration, which the upstream suite's system check
	# reads (Debian builds no /proc/config.gz).
	mkdir -p "$dir.tmp/rootfs/boot"
	cp "$dir.tmp/kernel/x/boot/config-$kver" "$dir.tmp/rootfs/boot/"
	depmod -b "$dir.tmp/rootfs" "$kver"

	initramfs "$dir.tmp" "$kver"
	configure_guest "$dir.tmp/rootfs"
	rm -rf "$dir.tmp/kernel"
	touch "$dir.tmp/ready"
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
	# Older images (other inputs) only take space: about 1 GB each.
	find "$VM_CACHE" -mindepth 1 -maxdepth 1 -type d ! -path "$dir" -exec rm -rf {} +
	log "VM image built in $((SECONDS - t0)) s"
	echo "$dir"
}

# initramfs: static busybox and the 9p modules; its init mounts the shared
# root and hands over to systemd. Both 9p mounts cache freely (cache=loose):
# only the guest changes them while it runs, and uncached, every exec and
# read went through qemu's main thread (a lane 3 times as slow).
initramfs() {
	local dir=$1 kver=$2 root=$1/initramfs
	mkdir -p "$root"/{bin,dev,proc,sys,newroot,lib}
	cp /bin/busybox "$root/bin/busybox"
	: >"$root/modules"
	for m in $MODULES; do
		local f
		f=$(modprobe -d "$dir/rootfs" -S "$kver" --show-depends "$m" 2>/dev/null | awk '$1 == "insmod" {print $2}' | tail -n 1)
		[ -n "$f" ] || continue # built into the kernel
		case "$f" in
		*.xz) xz -dc "$f" >"$root/lib/$m.ko" ;;
		*) cp "$f" "$root/lib/$m.ko" ;;
		esac
		echo "$m" >>"$root/modules"
	done
	cat >"$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules); do insmod /lib/$m.ko || echo "initramfs: insmod $m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose root /newroot || { echo "initramfs: cannot mount the 9p root"; poweroff -f; }
exec switch_root /newroot /sbin/init
INIT
	chmod +x "$root/init"
	(cd "$root" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$dir/initramfs.gz"
}

# configure_guest: mounts, network, and the one-shot unit that runs the
# shared /work/run.sh and powers off.
configure_guest() {
	local r=$1
	echo nodeagent-vm >"$r/etc/hostname"
	cat >"$r/etc/fstab" <<'FSTAB'
work /work 9p trans=virtio,version=9p2000.L,msize=262144,cache=loose 0 0
tmpfs /tmp tmpfs defaults 0 0
tmpfs /var/log tmpfs defaults 0 0
# overlayfs cannot use 9p as its upper layer: containerd's state lives in memory
tmpfs /var/lib/containerd tmpfs defaults 0 0
FSTAB
	mkdir -p "$r/work" "$r/etc/systemd/network"
	cat >"$r/etc/systemd/network/20-wired.network" <<'NET'
[Match]
Name=en* eth*

[Network]
DHCP=yes
NET
	ln -sf /lib/systemd/system/systemd-networkd.service "$r/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
	# The lane starts containerd itself, with its own configuration.
	ln -sf /dev/null "$r/etc/systemd/system/containerd.service"
	cat >"$r/etc/systemd/system/nodeagent-vm-run.service" <<'UNIT'
[Unit]
Description=Run /work/run.sh once and power off
After=multi-user.target network-online.target
Wants=network-online.target

[Service]
Type=oneshot
# The result is on the host as soon as it is written (9p); what run.sh
# started would only delay a regular shutdown, so power off at once.
ExecStart=/bin/sh -c 'code=0; /work/run.sh >/work/run.log 2>&1 || code=$?; echo $code >/work/result; sync; systemctl poweroff --force --force'
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
UNIT
	ln -sf /etc/systemd/system/nodeagent-vm-run.service "$r/etc/systemd/system/multi-user.target.wants/nodeagent-vm-run.service"
	# No login prompts on the console: only boot and test output.
	ln -sf /dev/null "$r/etc/systemd/system/serial-getty@ttyS0.service"
	ln -sf /dev/null "$r/etc/systemd/system/getty@tty1.service"
}

run() {
	local work=${1:?usage: hack/vm.sh run DIR}
	[ -x "$work/run.sh" ] || die "$work/run.sh missing or not executable"
	local dir; dir=$(image)
	rm -f "$work/result" "$work/run.log"
	log "booting (qemu TCG, ${VM_CPUS} vCPUs${VM_SMP:+ ($VM_SMP)}, ${VM_MEMORY} MiB); console: $work/console.log"
	local t0=$SECONDS
	timeout "$VM_TIMEOUT" qemu-system-x86_64 -accel tcg -cpu "max${VM_SMP:+,vendor=GenuineIntel}" -smp "$VM_CPUS${VM_SMP:+,$VM_SMP}" -m "$VM_MEMORY" \
		-kernel "$dir/vmlinuz" -initrd "$dir/initramfs.gz" \
		-append "console=ttyS0 panic=-1 systemd.unified_cgroup_hierarchy=1 systemd.show_status=0 loglevel=4" \
		-virtfs "local,path=$dir/rootfs,mount_tag=root,security_model=passthrough,id=root" \
		-virtfs "local,path=$work,mount_tag=work,security_model=passthrough,id=work" \
		-netdev user,id=n0 -device virtio-net-pci,netdev=n0 \
		-display none -serial "file:$work/console.log" -no-reboot ||
		log "qemu ended with status $? after $((SECONDS - t0)) s"
	[ -f "$work/result" ] || { tail -n 30 "$work/console.log" >&2; die "the VM did not report a result (console: $work/console.log)"; }
	local code; code=$(cat "$work/result")
	log "guest run finished with code $code after $((SECONDS - t0)) s"
	return "$code"
}

# shellcheck source=hack/lib.sh
. "$(dirname "$0")/lib.sh"

case "${1:-}" in
deps) deps ;;
image) image ;;
run) run "${2:-}" ;;
*) echo "usage: $0 deps|image|run DIR" >&2; exit 2 ;;
esac
