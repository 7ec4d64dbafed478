//go:build integration

package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"
)

var releasedLine = regexp.MustCompile(`released the binary's idle pages.* rss_file_before=(\d+) rss_file_after=(\d+)`)

// Once pod work is quiet the agent drops the mappings of its start-up
// pages (--release-binary-pages, on by default), and goes on serving and
// running its pod with its code mapped back as it runs.
func TestAgentReleasesItsStartUpPagesOnceQuiet(t *testing.T) {
	n := newNode(t, "")
	n.start()
	n.writeManifest("quiet.yaml", podManifest("quiet", ""))
	n.waitRunning("quiet")
	seen := len(n.logText())

	var before, after int64
	n.eventually("a release of the binary's pages after the pod's start", time.Minute, func() error {
		m := releasedLine.FindStringSubmatch(n.logText()[seen:])
		if m == nil {
			return fmt.Errorf("no release logged yet")
		}
		before, _ = strconv.ParseInt(m[1], 10, 64)
		after, _ = strconv.ParseInt(m[2], 10, 64)
		return nil
	})
	// Starting the pod mapped MiBs of the binary; what stays mapped at the
	// release is what the release itself runs.
	if before < 4<<20 || after > before/2 {
		t.Fatalf("file-backed RSS went from %d to %d KiB at the release; want at least halved", before>>10, after>>10)
	}
	// The agent runs on: its API answers and the pod it runs is as it was.
	p := n.waitRunning("quiet")
	if p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Fatalf("the container restarted after the release: %+v", p.Status.ContainerStatuses[0])
	}
}
