package control

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func serve(t *testing.T, path string, allow uint32) {
	t.Helper()
	l, err := Listen(path, 4)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ConnContext: ConnContext, Handler: RequireUID(allow, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "done")
	}))}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

func TestTheSocketIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	path := filepath.Join(dir, "nodeagent.sock")
	serve(t, path, uint32(os.Geteuid()))
	st, _ := os.Stat(dir)
	if st.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", st.Mode().Perm())
	}
	st, _ = os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600 (created under umask 0177, not chmod-ed after)", st.Mode().Perm())
	}
	if _, err := Listen(path, 4); err == nil || !strings.Contains(err.Error(), "is in use") {
		t.Errorf("a second listener: %v", err)
	}
}

func TestListenRemovesOnlyAStaleSocket(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "nodeagent.sock")
	os.WriteFile(file, []byte("not a socket"), 0o600)
	if _, err := Listen(file, 4); err == nil || !strings.Contains(err.Error(), "something other than a socket") {
		t.Errorf("a regular file at the socket path: %v", err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("the file was removed: %v", err)
	}
	open := filepath.Join(t.TempDir(), "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	l, err := Listen(filepath.Join(open, "s.sock"), 4)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if st, _ := os.Stat(open); st.Mode().Perm() != 0o700 {
		t.Errorf("an open directory of ours must be made 0700, is %v", st.Mode().Perm())
	}
}

// The server answers only the allowed uid: a caller with another uid gets
// 403 and the handler never runs.
func TestServerChecksThePeersUID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	serve(t, path, uint32(os.Geteuid())+1) // a uid this test is not
	resp, err := Client(path, uint32(os.Geteuid()), time.Second).Get("http://agent/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "serves uid") || strings.Contains(string(body), "done") {
		t.Errorf("%d %q: want 403 before the handler", resp.StatusCode, body)
	}

	ok := filepath.Join(t.TempDir(), "ok.sock")
	serve(t, ok, uint32(os.Geteuid()))
	resp, err = Client(ok, uint32(os.Geteuid()), time.Second).Get("http://agent/x")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the allowed uid: %v %v", resp, err)
	}
	resp.Body.Close()
}

// The client trusts only a server with the uid it expects (root for
// nodectl): a socket a local user put up is refused before anything is
// sent.
func TestClientChecksTheServersUID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	serve(t, path, uint32(os.Geteuid()))
	_, err := Client(path, uint32(os.Geteuid())+1, time.Second).Get("http://agent/x")
	if !errors.Is(err, ErrUntrustedPeer) {
		t.Errorf("got %v, want ErrUntrustedPeer", err)
	}
}

// A caller that opens connections and never speaks holds a slot each: past
// maxConns, new connections wait in the backlog instead of costing the
// agent, and a slot comes back when a connection closes.
func TestListenBoundsOpenConnections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := Listen(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	first, _ := net.Dial("unix", path)
	defer first.Close()
	held := <-accepted
	second, _ := net.Dial("unix", path)
	defer second.Close()
	select {
	case <-accepted:
		t.Fatal("a second connection was accepted past the limit of 1")
	case <-time.After(200 * time.Millisecond):
	}
	held.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the freed slot was not reused")
	}
}
