// Command untrusted is a local user's stand-in for the agent: it serves
// the control socket's paths on a unix socket, as whatever user runs it,
// and records every request it gets. The security tests run it as nobody.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	l, err := net.Listen("unix", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(os.Args[1], 0o777)
	http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f, err := os.OpenFile(os.Args[2], os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o666); err == nil {
			fmt.Fprintf(f, "%s %s\n", r.Method, r.URL.Path)
			f.Close()
		}
		if r.URL.Path == "/configz" {
			fmt.Fprintf(w, `{"kubeletconfig": {"staticPodPath": %q, "podLogsDir": "/", "containerRuntimeEndpoint": "unix://%s"}}`, os.Args[3], os.Args[1])
			return
		}
		fmt.Fprintln(w, `{"name": "x", "file": "/etc/passwd", "result": "created"}`)
	}))
}
