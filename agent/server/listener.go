package server

import (
	"net"
	"sync"
)

// LimitClients bounds the connections l hands out: at most total at once
// (Accept waits for one to close, leaving new ones in the kernel's
// backlog) and at most perClient from one source address (the ones past
// it are closed as they come). A client that opens connections and never
// speaks holds at most perClient slots until the TLS handshake timeout
// frees them: it cannot lock out the API server, whose logs, exec and
// port-forward come from another address, nor the metrics scrapes.
func LimitClients(l net.Listener, total, perClient int) net.Listener {
	return &clientLimiter{Listener: l, slots: make(chan struct{}, total), perClient: perClient, held: map[string]int{}, done: make(chan struct{})}
}

type clientLimiter struct {
	net.Listener
	slots     chan struct{}
	perClient int
	done      chan struct{} // closed by Close: an Accept waiting for a slot returns
	closeOnce sync.Once

	mu   sync.Mutex
	held map[string]int // open connections by source address
}

func (l *clientLimiter) Accept() (net.Conn, error) {
	for {
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		client := sourceAddress(c.RemoteAddr())
		l.mu.Lock()
		if l.held[client] >= l.perClient {
			l.mu.Unlock()
			<-l.slots
			c.Close()
			continue
		}
		l.held[client]++
		l.mu.Unlock()
		return &limitedConn{Conn: c, release: func() { l.release(client) }}, nil
	}
}

// Close closes the listener; an Accept waiting for a slot returns.
func (l *clientLimiter) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

func (l *clientLimiter) release(client string) {
	l.mu.Lock()
	if l.held[client]--; l.held[client] <= 0 {
		delete(l.held, client)
	}
	l.mu.Unlock()
	<-l.slots
}

// sourceAddress is a connection's client: its IPv4 address, its IPv6
// /64 (one host holds a whole one), or "loopback" for any loopback
// address (a local user may dial from every one of 127/8).
func sourceAddress(a net.Addr) string {
	var ip net.IP
	if tcp, ok := a.(*net.TCPAddr); ok {
		ip = tcp.IP
	} else if host, _, err := net.SplitHostPort(a.String()); err == nil {
		ip = net.ParseIP(host)
	}
	switch {
	case ip == nil:
		return a.String()
	case ip.IsLoopback():
		return "loopback"
	case ip.To4() != nil:
		return ip.To4().String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// limitedConn gives its slot back once, on the first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
