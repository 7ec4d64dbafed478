package shutdown

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
)

// logind's and systemd's D-Bus names, as the kubelet calls them
// (pkg/kubelet/nodeshutdown/systemd).
const (
	logindService   = "org.freedesktop.login1"
	logindObject    = dbus.ObjectPath("/org/freedesktop/login1")
	logindInterface = "org.freedesktop.login1.Manager"
	systemdService  = "org.freedesktop.systemd1"
	systemdObject   = dbus.ObjectPath("/org/freedesktop/systemd1")
)

// DropInDir holds the logind drop-in that raises InhibitDelayMaxSec.
var DropInDir = "/etc/systemd/logind.conf.d"

// busLogind is logind on the system bus.
type busLogind struct {
	conn *dbus.Conn
	log  *slog.Logger
}

// ConnectLogind connects to logind on the system bus.
func ConnectLogind(log *slog.Logger) func() (Logind, error) {
	return func() (Logind, error) {
		conn, err := dbus.ConnectSystemBus()
		if err != nil {
			return nil, err
		}
		return &busLogind{conn: conn, log: log}, nil
	}
}

func (l *busLogind) InhibitDelayMax() (time.Duration, error) {
	v, err := l.conn.Object(logindService, logindObject).GetProperty(logindInterface + ".InhibitDelayMaxUSec")
	if err != nil {
		return 0, fmt.Errorf("failed reading InhibitDelayMaxUSec property from logind: %w", err)
	}
	us, ok := v.Value().(uint64)
	if !ok {
		return 0, errors.New("InhibitDelayMaxUSec from logind is not a uint64 as expected")
	}
	return time.Duration(us) * time.Microsecond, nil
}

// RaiseInhibitDelay writes the kubelet's drop-in and has systemd send
// logind SIGHUP, which rereads it.
func (l *busLogind) RaiseInhibitDelay(d time.Duration) error {
	if err := os.MkdirAll(DropInDir, 0o755); err != nil {
		return fmt.Errorf("failed creating %v directory: %w", DropInDir, err)
	}
	path := filepath.Join(DropInDir, "99-kubelet.conf")
	conf := fmt.Sprintf("# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=%.0f\n", d.Seconds())
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return fmt.Errorf("failed writing logind shutdown inhibit override file %v: %w", path, err)
	}
	call := l.conn.Object(systemdService, systemdObject).Call("org.freedesktop.systemd1.Manager.KillUnit", 0,
		"systemd-logind.service", "all", int32(syscall.SIGHUP))
	if call.Err != nil {
		return fmt.Errorf("unable to reload logind conf: %w", call.Err)
	}
	return nil
}

func (l *busLogind) Inhibit() (func() error, error) {
	var fd dbus.UnixFD
	call := l.conn.Object(logindService, logindObject).Call(logindInterface+".Inhibit", 0,
		"shutdown", "kubelet", "Kubelet needs time to handle node shutdown", "delay")
	if call.Err != nil {
		return nil, call.Err
	}
	if err := call.Store(&fd); err != nil {
		return nil, fmt.Errorf("failed storing inhibit lock file descriptor: %w", err)
	}
	var once sync.Once
	return func() error {
		var err error
		once.Do(func() {
			if e := syscall.Close(int(fd)); e != nil {
				err = fmt.Errorf("unable to close systemd inhibitor lock: %w", e)
			}
		})
		return err
	}, nil
}

// PrepareForShutdown subscribes to logind's signal: from any sender, as
// the kubelet's match rule (the upstream specs emit it themselves).
func (l *busLogind) PrepareForShutdown(ctx context.Context) (<-chan bool, error) {
	if err := l.conn.AddMatchSignal(dbus.WithMatchInterface(logindInterface), dbus.WithMatchMember("PrepareForShutdown"),
		dbus.WithMatchObjectPath(logindObject)); err != nil {
		return nil, err
	}
	signals := make(chan *dbus.Signal, 1)
	l.conn.Signal(signals)
	out := make(chan bool, 1)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case s, ok := <-signals:
				if !ok {
					return
				}
				if s == nil || s.Name != logindInterface+".PrepareForShutdown" || len(s.Body) == 0 {
					continue
				}
				b, ok := s.Body[0].(bool)
				if !ok {
					l.log.Warn("PrepareForShutdown event was not bool type as expected")
					continue
				}
				select {
				case out <- b:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

func (l *busLogind) Close() error { return l.conn.Close() }
