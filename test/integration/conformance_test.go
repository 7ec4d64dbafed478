//go:build integration

package integration

import (
	"encoding/xml"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"nodeagent/e2e/conformance"
)

// The conformance suite passes against an agent on this node, and its
// JUnit report has the shape CI systems read.
func TestConformanceSuitePassesOnTheLocalNode(t *testing.T) {
	n := newNode(t, "")
	n.start()
	junit := filepath.Join(t.TempDir(), "junit.xml")
	cmd := exec.Command(nodectlBin, "conformance", "--server", n.url(""), "--control-socket", n.controlSocket(), "--image", testImage, "--parallel", "4", "--junit", junit)
	out, err := cmd.CombinedOutput()
	total := len(conformance.Cases())
	if err != nil || !strings.Contains(string(out), "0 failed, 0 skipped") {
		t.Fatalf("nodectl conformance: %v\n%s", err, out)
	}
	var doc struct {
		XMLName xml.Name `xml:"testsuites"`
		Tests   int      `xml:"tests,attr"`
		Suites  []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Cases    []struct {
				Name    string    `xml:"name,attr"`
				Time    string    `xml:"time,attr"`
				Failure *struct{} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(mustRead(t, junit), &doc); err != nil {
		t.Fatalf("JUnit report does not parse: %v", err)
	}
	if doc.Tests != total || len(doc.Suites) != 1 || doc.Suites[0].Failures != 0 || len(doc.Suites[0].Cases) != total {
		t.Fatalf("JUnit report: %d tests, suites %+v; want %d cases, no failures", doc.Tests, doc.Suites, total)
	}
	for _, c := range doc.Suites[0].Cases {
		if !strings.Contains(c.Name, "[NodeConformance]") && !strings.Contains(c.Name, "[NodeFeature:Eviction]") || c.Time == "" {
			t.Errorf("JUnit case %+v", c)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(n.manifests, "conformance-*")); len(left) > 0 {
		t.Errorf("manifests left behind: %v", left)
	}
	if pods, _ := n.pods(); len(pods) > 0 {
		t.Errorf("%d pods left behind", len(pods))
	}
}

// Ctrl-C in the middle of a case still removes its pods.
func TestInterruptedConformanceRunCleansUp(t *testing.T) {
	n := newNode(t, "")
	n.start()
	cmd := exec.Command(nodectlBin, "conformance", "--server", n.url(""), "--control-socket", n.controlSocket(), "--image", testImage, "--focus", `exec "cat /tmp/health" liveness`)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.eventually("the case's pod running", 60*time.Second, func() error {
		pods, err := n.pods()
		if err != nil || len(pods) != 1 || pods[0].Status.Phase != "Running" {
			return fmt.Errorf("pods %d (%v)", len(pods), err)
		}
		return nil
	})
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 || !strings.Contains(out.String(), "interrupted") {
		t.Fatalf("want exit 1 saying interrupted, got %v\n%s", err, out.String())
	}
	if left, _ := filepath.Glob(filepath.Join(n.manifests, "conformance-*")); len(left) > 0 {
		t.Errorf("manifests left behind: %v", left)
	}
	if pods, _ := n.pods(); len(pods) > 0 {
		t.Errorf("%d pods left behind after the interrupt", len(pods))
	}
}
