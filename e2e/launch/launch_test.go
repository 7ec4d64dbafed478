package launch

import (
	"context"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The test binary doubles as a fake agent: with FAKE_AGENT set it serves
// /healthz on the config's readOnlyPort until SIGTERM, or exits at once
// with FAKE_AGENT=fail.
func TestMain(m *testing.M) {
	switch os.Getenv("FAKE_AGENT") {
	case "serve":
		fakeAgent()
		return
	case "fail":
		os.Stderr.WriteString("config: cgroupRoot: invalid value\n")
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

func fakeAgent() {
	var config string
	for i, a := range os.Args {
		if a == "--config" {
			b, _ := os.ReadFile(os.Args[i+1])
			config = string(b)
		}
	}
	port := regexp.MustCompile(`readOnlyPort: (\d+)`).FindStringSubmatch(config)[1]
	srv := &http.Server{Addr: "127.0.0.1:" + port, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })}
	go srv.ListenAndServe()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	<-stop
	srv.Close()
}

func newAgent(t *testing.T, mode string) *Agent {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Bin: self, RuntimeEndpoint: "unix:///run/fake.sock", Dir: t.TempDir(), Config: "maxPods: 7\n", Env: []string{"FAKE_AGENT=" + mode}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestNewWritesTheAgentsOwnConfig(t *testing.T) {
	a := newAgent(t, "serve")
	b, err := os.ReadFile(a.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"containerRuntimeEndpoint: unix:///run/fake.sock", "staticPodPath: " + a.Manifests,
		"cgroupRoot: /" + a.NodeName, "readOnlyPort: ", "maxPods: 7"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("config lacks %q:\n%s", want, b)
		}
	}
	if !strings.HasPrefix(a.NodeName, "nodeagent-") || a.Port == 0 {
		t.Errorf("defaults: node %q port %d", a.NodeName, a.Port)
	}
	if args := strings.Join(a.Command().Args, " "); !strings.Contains(args, "--hostname-override "+a.NodeName) || !strings.Contains(args, "--control-socket "+a.ControlSocket) {
		t.Errorf("command line %s", args)
	}
}

func TestStartWaitsForHealthAndStopEndsTheProcess(t *testing.T) {
	a := newAgent(t, "serve")
	ctx := context.Background()
	for range 2 { // a stopped agent starts again
		if err := a.Start(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := a.Client.Healthz(ctx); err != nil {
			t.Fatalf("Start returned before /healthz passed: %v", err)
		}
		if err := a.Stop(5 * time.Second); err != nil {
			t.Fatalf("Stop = %v, want a clean exit on SIGTERM", err)
		}
		select {
		case <-a.Exited():
		default:
			t.Fatal("Stop returned while the process still ran")
		}
	}
}

func TestAnAgentThatExitsIsAnErrorWithItsOutput(t *testing.T) {
	a := newAgent(t, "fail")
	err := a.Start(context.Background(), 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "cgroupRoot: invalid value") {
		t.Fatalf("Start = %v, want the agent's last lines", err)
	}
}
