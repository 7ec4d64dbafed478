// Package control is the agent's control socket: a unix socket for the
// operations that act as root on the node (delete a pod, write a
// manifest) and for the configuration those need. Unlike the read-only
// port, which any local user can answer when the agent is down, the socket
// lives in a directory only root can enter, and each side checks the
// other's uid (SO_PEERCRED): the agent serves only root, and nodectl
// trusts only an agent running as root.
package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultSocket is where the agent listens unless told otherwise.
const DefaultSocket = "/run/nodeagent/nodeagent.sock"

// Listen opens the control socket at path for at most maxConns
// connections at once (more wait in the kernel's backlog). Its directory
// is created 0700 (or must already be owned by this user and not open to
// others), the socket is created under umask 0177, a live socket there is
// an error (another agent runs) and a stale one is replaced; nothing else
// at path is removed. Each accepted connection carries its peer's uid
// (see ConnContext).
func Listen(path string, maxConns int) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("control socket directory: %w", err)
	}
	if err := checkPrivate(dir); err != nil {
		return nil, err
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("control socket %s is in use: is another nodeagent running?", path)
	}
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("control socket %s: something other than a socket is there (%s); remove it", path, st.Mode().Type())
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	old := unix.Umask(0o177)
	l, err := net.Listen("unix", path)
	unix.Umask(old)
	if err != nil {
		return nil, err
	}
	return &listener{Listener: l, slots: make(chan struct{}, max(maxConns, 1))}, nil
}

// listener records each connection's peer uid and bounds how many are
// open at once.
type listener struct {
	net.Listener
	slots chan struct{}
}

func (l *listener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	uid, uerr := PeerUID(c)
	return &peerConn{Conn: c, uid: uid, known: uerr == nil, release: func() { <-l.slots }}, nil
}

type peerConn struct {
	net.Conn
	uid     uint32
	known   bool
	once    sync.Once
	release func()
}

func (c *peerConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// checkPrivate requires dir to be owned by this user with no access for
// group or others; a directory this user owns is made so.
func checkPrivate(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	sys := st.Sys().(*syscall.Stat_t)
	if !st.IsDir() || int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("control socket directory %s must be a directory owned by uid %d (it is %s, uid %d)", dir, os.Geteuid(), st.Mode().Type(), sys.Uid)
	}
	if st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("control socket directory %s: %w", dir, err)
		}
	}
	return nil
}

type peerKey struct{}

// ConnContext records the peer's uid of a connection Listen accepted; use
// it as the http.Server's ConnContext together with RequireUID.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if pc, ok := c.(*peerConn); ok && pc.known {
		return context.WithValue(ctx, peerKey{}, pc.uid)
	}
	return ctx
}

// RequireUID answers 403 to any peer but uid (root for the agent).
func RequireUID(uid uint32, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := r.Context().Value(peerKey{}).(uint32)
		if !ok || got != uid {
			http.Error(w, fmt.Sprintf("forbidden: the control socket serves uid %d only (caller: %s)", uid, describeUID(got, ok)), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func describeUID(uid uint32, ok bool) string {
	if !ok {
		return "unknown"
	}
	return fmt.Sprintf("uid %d", uid)
}

// PeerUID is the uid of the process at the other end of a unix socket,
// as the kernel recorded it at connect (SO_PEERCRED).
func PeerUID(c net.Conn) (uint32, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, errors.New("not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	return cred.Uid, nil
}

// ErrUntrustedPeer is a control socket whose server is not root.
var ErrUntrustedPeer = errors.New("the process behind the control socket is not root")

// Client is an HTTP client of the control socket at path. Every
// connection is checked: the process serving it must run as serverUID
// (0: root), else the request fails with ErrUntrustedPeer and nothing is
// sent.
func Client(path string, serverUID uint32, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "unix", path)
			if err != nil {
				return nil, err
			}
			uid, err := PeerUID(c)
			if err == nil && uid != serverUID {
				err = fmt.Errorf("%w: %s is served by uid %d", ErrUntrustedPeer, path, uid)
			}
			if err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		},
	}}
}
