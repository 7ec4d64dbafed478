//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
)

// makeTarget runs a Makefile target of the repository with extra variables.
func makeTarget(t *testing.T, target string, vars ...string) string {
	t.Helper()
	out, err := exec.Command("make", append([]string{"-C", "../..", "--no-print-directory", target}, vars...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("make %s: %v\n%s", target, err, out)
	}
	return string(out)
}

// TestInstallPutsAVerifiedServiceInPlace installs into a staging root as
// an operator would into /: the binaries, a unit that systemd-analyze
// verify accepts, and a default config that validates; uninstall takes it
// all away again but keeps a config the operator changed.
func TestInstallPutsAVerifiedServiceInPlace(t *testing.T) {
	root := t.TempDir()
	makeTarget(t, "install", "DESTDIR="+root)
	for _, f := range []string{"usr/local/bin/nodeagent", "usr/local/bin/nodectl", "usr/local/bin/nodetest", "etc/systemd/system/nodeagent.service",
		"etc/nodeagent/config.yaml", "usr/local/share/doc/nodeagent/README.md", "usr/local/share/doc/nodeagent/docs/eviction.md"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "etc/nodeagent/manifests")); err != nil || !fi.IsDir() {
		t.Errorf("no manifest directory: %v", err)
	}
	agent := filepath.Join(root, "usr/local/bin/nodeagent")
	config := filepath.Join(root, "etc/nodeagent/config.yaml")
	if out, err := exec.Command(agent, "--validate-config", config).CombinedOutput(); err != nil || !strings.HasSuffix(string(out), ": valid\n") || strings.Contains(string(out), "warning") {
		t.Errorf("the default config does not validate cleanly: %v\n%s", err, out)
	}

	// systemd-analyze checks the unit against the binary it starts; the
	// staged binary stands in for /usr/local/bin. It reports bad settings
	// ("Failed to parse ..., ignoring") on stderr with exit code 0.
	unit, err := os.ReadFile(filepath.Join(root, "etc/systemd/system/nodeagent.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/local/bin/nodeagent --config /etc/nodeagent/config.yaml\n") {
		t.Errorf("ExecStart does not start the installed binary on the installed config:\n%s", unit)
	}
	staged := filepath.Join(t.TempDir(), "nodeagent.service")
	if err := os.WriteFile(staged, []byte(strings.Replace(string(unit), "/usr/local/bin/nodeagent", agent, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", "--man=no", staged).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, want := range []string{"Type=notify", "WatchdogSec=", "Restart=always", "KillMode=process", "Delegate=yes", "OOMScoreAdjust=-999"} {
		if !strings.Contains(string(unit), "\n"+want) {
			t.Errorf("unit lacks %s", want)
		}
	}

	// A changed config survives uninstall; everything else goes.
	if err := os.WriteFile(config, append([]byte("# tuned by the operator\n"), mustRead(t, config)...), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := makeTarget(t, "uninstall", "DESTDIR="+root); !strings.Contains(out, "kept "+config) {
		t.Errorf("uninstall did not say it kept the changed config:\n%s", out)
	}
	for _, f := range []string{"usr/local/bin/nodeagent", "usr/local/bin/nodectl", "usr/local/bin/nodetest", "etc/systemd/system/nodeagent.service", "usr/local/share/doc/nodeagent"} {
		if _, err := os.Stat(filepath.Join(root, f)); !os.IsNotExist(err) {
			t.Errorf("%s left after uninstall (%v)", f, err)
		}
	}
	if _, err := os.Stat(config); err != nil {
		t.Errorf("the changed config was removed: %v", err)
	}

	// An untouched install leaves nothing behind, whichever runtime its
	// config was pointed at.
	root = t.TempDir()
	makeTarget(t, "install", "DESTDIR="+root, "INSTALL_CRI_ENDPOINT=unix:///run/elsewhere.sock")
	makeTarget(t, "uninstall", "DESTDIR="+root)
	if _, err := os.Stat(filepath.Join(root, "etc/nodeagent")); !os.IsNotExist(err) {
		t.Errorf("/etc/nodeagent left after uninstalling an untouched install (%v)", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSystemdNotifications gives the agent the NOTIFY_SOCKET and watchdog
// interval systemd would: READY=1 once it serves, WATCHDOG=1 while healthy,
// STOPPING=1 on SIGTERM.
func TestSystemdNotifications(t *testing.T) {
	n := newNode(t, "")
	sock := filepath.Join(n.dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	messages := make(chan string, 100)
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				close(messages)
				return
			}
			messages <- string(buf[:k])
		}
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case m, ok := <-messages:
			if !ok {
				t.Fatalf("notify socket closed while waiting for %s", what)
			}
			return m
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s on the notify socket within 30s", what)
		}
		return ""
	}
	n.env = []string{"NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=600000"}
	n.start()
	if m := next("READY=1"); m != "READY=1" {
		t.Fatalf("first notification %q, want READY=1", m)
	}
	// The agent pets every third of the interval: several within 2 s.
	deadline := time.After(2 * time.Second)
	pets := 0
	for waiting := true; waiting; {
		select {
		case m := <-messages:
			if m == "WATCHDOG=1" {
				pets++
			}
		case <-deadline:
			waiting = false
		}
	}
	if pets < 3 {
		t.Errorf("%d WATCHDOG=1 in 2s with WATCHDOG_USEC=600000, want at least 3", pets)
	}
	if err := n.stop(); err != nil {
		t.Fatalf("agent exit after SIGTERM: %v", err)
	}
	for {
		m := next("STOPPING=1")
		if m == "STOPPING=1" {
			break
		}
		if m != "WATCHDOG=1" {
			t.Fatalf("unexpected notification %q before STOPPING=1", m)
		}
	}
}

// metricFamilies scrapes /metrics and parses it with the upstream parser.
func (n *node) metricFamilies() map[string]*dto.MetricFamily {
	n.t.Helper()
	return n.scrape("/metrics")
}

// scrape parses one of the agent's Prometheus endpoints.
func (n *node) scrape(path string) map[string]*dto.MetricFamily {
	n.t.Helper()
	resp, err := http.Get(n.url(path))
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		n.t.Fatalf("%s does not parse: %v", path, err)
	}
	return families
}

// metricValue is a counter's or gauge's value, or a histogram's count, of
// the series with the given labels ("k=v" pairs); ok is false when absent.
func metricValue(families map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f, ok := families[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			match = match && have[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsAfterAPodStartsAndIsProbed reads /metrics with the upstream
// parser after one pod started and passed its readiness probe: the
// kubelet's series are there, with values that match what happened.
func TestMetricsAfterAPodStartsAndIsProbed(t *testing.T) {
	n := newNode(t, "")
	n.writeManifest("probed.yaml", scriptPod("probed", "", "while true; do sleep 1 & wait $!; done",
		"    readinessProbe: {exec: {command: [\"true\"]}, periodSeconds: 1}\n"))
	n.start()
	n.waitPod("probed", 60*time.Second, "ready", func(p *corev1.Pod) error {
		if p == nil {
			return fmt.Errorf("not listed yet")
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("not ready: %+v", p.Status.Conditions)
	})
	// Running pods and containers are as the last periodic relist saw
	// them: wait for two.
	var fams map[string]*dto.MetricFamily
	n.eventually("two relists measured", 10*time.Second, func() error {
		fams = n.metricFamilies()
		if v, _ := metricValue(fams, "kubelet_pleg_relist_duration_seconds"); v < 2 {
			return fmt.Errorf("%v relists", v)
		}
		return nil
	})
	for _, c := range []struct {
		name   string
		labels []string
		min    float64
		max    float64
	}{
		{"kubelet_running_pods", nil, 1, 1},
		{"kubelet_running_containers", []string{"container_state=running"}, 1, 1},
		{"kubelet_pod_start_duration_seconds", nil, 1, 1},
		{"kubelet_pod_start_sli_duration_seconds", nil, 1, 1},
		{"kubelet_pleg_relist_duration_seconds", nil, 1, 1e9},
		{"kubelet_runtime_operations_duration_seconds", []string{"operation_type=run_podsandbox"}, 1, 1},
		{"kubelet_runtime_operations_duration_seconds", []string{"operation_type=create_container"}, 1, 1},
		{"kubelet_runtime_operations_duration_seconds", []string{"operation_type=list_containers"}, 1, 1e9},
		{"kubelet_runtime_operations_duration_seconds", []string{"operation_type=exec_sync"}, 1, 1e9},
		{"prober_probe_total", []string{"probe_type=Readiness", "result=successful"}, 1, 1e9},
		{"prober_probe_duration_seconds", []string{"probe_type=Readiness"}, 1, 1e9},
		{"nodeagent_prober_missed_periods_total", []string{"probe_type=Readiness"}, 0, 0},
		{"process_resident_memory_bytes", nil, 1 << 20, 1 << 30},
		{"kubelet_node_name", []string{"node=" + n.name}, 1, 1},
		{"kubelet_pod_worker_duration_seconds", []string{"operation_type=create"}, 1, 1},
		{"kubelet_pod_worker_duration_seconds", []string{"operation_type=sync"}, 1, 1e9},
		{"kubelet_pleg_relist_interval_seconds", nil, 1, 1e9},
		{"kubelet_runtime_operations_total", []string{"operation_type=run_podsandbox"}, 1, 1},
		{"kubelet_started_pods_total", nil, 1, 1},
		{"kubelet_started_pods_errors_total", nil, 0, 0},
		{"kubelet_started_user_namespaced_pods_total", nil, 0, 0},
		{"kubelet_runtime_operations_total", []string{"operation_type=exec_sync"}, 1, 1e9},
		{"kubelet_evictions", []string{"eviction_signal=memory.available"}, 0, 0},
		{"kubelet_certificate_manager_client_expiration_renew_errors", nil, 0, 0},
		{"kubelet_server_expiration_renew_errors", nil, 0, 0},
		// Standalone, no certificate is managed: +Inf, as the kubelet
		// reports an unused one.
		{"kubelet_certificate_manager_client_ttl_seconds", nil, math.Inf(1), math.Inf(1)},
		{"kubelet_certificate_manager_server_ttl_seconds", nil, math.Inf(1), math.Inf(1)},
	} {
		v, ok := metricValue(fams, c.name, c.labels...)
		if !ok || v < c.min || v > c.max {
			t.Errorf("%s%v = %v (present %v), want %v..%v", c.name, c.labels, v, ok, c.min, c.max)
		}
	}
	// /metrics/probes carries the probe metrics alone, labelled per
	// container as the kubelet's.
	probeFams := n.scrape("/metrics/probes")
	pod := "pod=probed-" + strings.ToLower(n.name)
	if v, ok := metricValue(probeFams, "prober_probe_total", "probe_type=Readiness", "result=successful", "container=main", pod, "namespace=default"); !ok || v < 1 {
		t.Errorf("/metrics/probes prober_probe_total{%s,container=main} = %v (present %v)", pod, v, ok)
	}
	if v, ok := metricValue(probeFams, "prober_probe_duration_seconds", "probe_type=Readiness", "container=main", pod); !ok || v < 1 {
		t.Errorf("/metrics/probes prober_probe_duration_seconds{%s} = %v (present %v)", pod, v, ok)
	}
	checkMixinSeries(t, fams)
	if _, ok := probeFams["kubelet_running_pods"]; ok {
		t.Error("/metrics/probes serves more than the probe metrics")
	}
	if t.Failed() {
		var names []string
		for name, f := range fams {
			names = append(names, fmt.Sprintf("%s(%d)", name, len(f.GetMetric())))
		}
		t.Logf("families: %v", names)
	}
	// The start took what it took: between 0 and the wait above, and the
	// SLI (less pulls and init containers) no more than the whole.
	total := fams["kubelet_pod_start_duration_seconds"].GetMetric()[0].GetHistogram().GetSampleSum()
	sli := fams["kubelet_pod_start_sli_duration_seconds"].GetMetric()[0].GetHistogram().GetSampleSum()
	if total <= 0 || total > 60 || sli > total {
		t.Errorf("pod start %vs, SLI %vs", total, sli)
	}
}

// SIGHUP takes the reloadable fields of the edited config file, names the
// ones that need a restart, and refuses a file that does not load while
// the agent keeps running on the old one.
func TestSIGHUPReloadsWhatIsSafe(t *testing.T) {
	n := newNode(t, "containerLogMaxFiles: 4\n")
	n.start()
	cfg, err := os.ReadFile(n.configFile)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(cfg), "containerLogMaxFiles: 4\n", "containerLogMaxFiles: 3\nimageGCHighThresholdPercent: 90\n", 1)
	edited = strings.Replace(edited, "fileCheckFrequency: 2s\n", "fileCheckFrequency: 3s\n", 1)
	if err := os.WriteFile(n.configFile, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	n.signal(syscall.SIGHUP)
	n.eventually("the reload logged", 10*time.Second, func() error {
		log := n.logText()
		if !strings.Contains(log, `msg="config reloaded"`) || !strings.Contains(log, `applied="[containerLogMaxFiles imageGCHighThresholdPercent]"`) {
			return fmt.Errorf("no reload with the two applied fields in the log")
		}
		if !strings.Contains(log, `take effect only after a restart`) || !strings.Contains(log, `fields=[fileCheckFrequency]`) {
			return fmt.Errorf("fileCheckFrequency not named as needing a restart")
		}
		return nil
	})
	var configz struct {
		Kubelet struct {
			ContainerLogMaxFiles        int32  `json:"containerLogMaxFiles"`
			ImageGCHighThresholdPercent int32  `json:"imageGCHighThresholdPercent"`
			FileCheckFrequency          string `json:"fileCheckFrequency"`
		} `json:"kubeletconfig"`
	}
	n.getJSON("/configz", &configz)
	if k := configz.Kubelet; k.ContainerLogMaxFiles != 3 || k.ImageGCHighThresholdPercent != 90 || k.FileCheckFrequency != "2s" {
		t.Errorf("configz after reload %+v, want the two reloaded fields and fileCheckFrequency still 2s", k)
	}

	if err := os.WriteFile(n.configFile, []byte(edited+"evictionHard: {memory.available: lots}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n.signal(syscall.SIGHUP)
	n.eventually("the refused reload logged", 10*time.Second, func() error {
		if log := n.logText(); !strings.Contains(log, "config reload refused; the running configuration stays") || !strings.Contains(log, "lots") {
			return fmt.Errorf("no refusal naming the bad value in the log")
		}
		return nil
	})
	n.getJSON("/configz", &configz)
	if configz.Kubelet.ContainerLogMaxFiles != 3 {
		t.Errorf("a refused reload changed the config: %+v", configz.Kubelet)
	}
	if resp, err := http.Get(n.url("/healthz")); err != nil || resp.StatusCode != 200 {
		t.Errorf("agent unhealthy after a refused reload: %v %v", resp, err)
	}
}

// checkMixinSeries: every series the kubernetes-mixin's kubelet alerts and
// recording rules read from the kubelet (test/mixin parses them with
// Prometheus's own PromQL parser) is in the scrape.
func checkMixinSeries(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	out, err := exec.Command(mixinSeriesBin, "../mixin/testdata/kubelet-rules.yaml").Output()
	if err != nil {
		t.Fatalf("%s: %v", mixinSeriesBin, err)
	}
	var uses []struct{ Series, Rule string }
	if err := json.Unmarshal(out, &uses); err != nil {
		t.Fatal(err)
	}
	if len(uses) < 9 {
		t.Fatalf("the mixin's rules read %d kubelet series; the parse must have gone wrong: %s", len(uses), out)
	}
	for _, u := range uses {
		name := u.Series
		if f, ok := fams[name]; ok && len(f.GetMetric()) > 0 {
			continue
		}
		// A histogram's _bucket, _sum and _count are one family.
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, cut := strings.CutSuffix(name, suffix); cut && fams[base].GetType() == dto.MetricType_HISTOGRAM && len(fams[base].GetMetric()) > 0 {
				name = ""
			}
		}
		if name != "" {
			t.Errorf("the kubernetes-mixin's %s reads %s; the agent does not export it", u.Rule, u.Series)
		}
	}
}
