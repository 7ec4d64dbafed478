# Shell helpers the hack/ scripts source. The sourcing script defines log.

# alive PIDFILE: true when the pid in PIDFILE is a running process as old
# as the file. After a host restart /run can outlive the processes, and
# their pids are soon taken by others (a build's compiler), which are
# younger than the file. The process's age is on the boot clock, the
# file's on the wall clock; in the TCG VM the first lags by seconds under
# load, so up to 10 % of the file's age (and 2 s) is let pass.
alive() {
	[ -f "$1" ] || return 1
	local pid age file
	pid=$(cat "$1")
	kill -0 "$pid" 2>/dev/null || return 1
	age=$(ps -o etimes= -p "$pid" 2>/dev/null) || return 1
	file=$(($(date +%s) - $(stat -c %Y "$1")))
	[ $((age * 10)) -ge $((file * 9 - 20)) ]
}

# apt_need PACKAGE...: install the Debian packages that are missing.
apt_need() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# stop PIDFILE NAME [SECONDS]: SIGTERM, wait (10 s by default), then SIGKILL.
stop() {
	local pidfile=$1 name=$2 secs=${3:-10}
	alive "$pidfile" || { rm -f "$pidfile"; return 0; }
	local pid; pid=$(cat "$pidfile")
	log "stopping $name (pid $pid)"
	kill "$pid" 2>/dev/null || true
	for _ in $(seq $((secs * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$pidfile"
}

# cgroup_v1_config: a sed expression that sets failCgroupV1: false in the
# example config on a cgroup v1 host (the kubelet's default, true, would
# refuse it); nothing on v2.
cgroup_v1_config() {
	if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then echo ''; else echo 's|^failCgroupV1: .*|failCgroupV1: false|'; fi
}

# k8s_version MODULE_DIR: the k8s.io/kubernetes release a hack/ Go module
# requires (in a require block or on a require line).
k8s_version() {
	awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit } $1 == "k8s.io/kubernetes" { print $2; exit }' "$1/go.mod"
}
