# Shell helpers the hack/ scripts source. The sourcing script defines log.

# alive PIDFILE: true when the pid in PIDFILE is a running process.
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

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
