package eviction

import (
	"context"
	"testing"
	"time"

	"github.com/google/cadvisor/utils/oomparser"
)

func TestOOMKillsAreForwardedFromStart(t *testing.T) {
	start := time.Unix(1000, 0)
	stream := make(chan *oomparser.OomInstance, 3)
	// From the ring buffer's past, a pod container over its limit, and a
	// node-wide OOM (whose victim cgroup the kernel's summary line lacks).
	stream <- &oomparser.OomInstance{Pid: 1, ProcessName: "old", TimeOfDeath: start.Add(-time.Minute), ContainerName: "/", VictimContainerName: "/"}
	stream <- &oomparser.OomInstance{Pid: 12441, ProcessName: "memhog", TimeOfDeath: start.Add(time.Second), Constraint: "CONSTRAINT_MEMCG",
		ContainerName: "/kubepods/besteffort/podd144c9e8/e2ac8ceb3a09", VictimContainerName: "/kubepods/besteffort/podd144c9e8/e2ac8ceb3a09"}
	stream <- &oomparser.OomInstance{Pid: 7, ProcessName: "stress", TimeOfDeath: start.Add(2 * time.Second), Constraint: "CONSTRAINT_NONE",
		ContainerName: "/", VictimContainerName: "/user.slice"}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan OOMKill, 3)
	done := make(chan struct{})
	go func() { forwardOOMs(ctx, stream, start, func(k OOMKill) { got <- k }); close(done) }()
	want := []OOMKill{
		{PID: 12441, Process: "memhog", Constraint: "CONSTRAINT_MEMCG", OOMMemcg: "/kubepods/besteffort/podd144c9e8/e2ac8ceb3a09",
			TaskMemcg: "/kubepods/besteffort/podd144c9e8/e2ac8ceb3a09", Seen: start.Add(time.Second)},
		{PID: 7, Process: "stress", Constraint: "CONSTRAINT_NONE", TaskMemcg: "/user.slice", Seen: start.Add(2 * time.Second)},
	}
	for _, w := range want {
		select {
		case k := <-got:
			if k != w {
				t.Errorf("got %+v, want %+v", k, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no kill forwarded, want %+v", w)
		}
	}
	cancel()
	<-done
	if len(got) != 0 {
		t.Errorf("forwarded the past: %+v", <-got)
	}
}

func TestPodUIDFromCgroup(t *testing.T) {
	for path, want := range map[string]string{
		"/nodeagent-bench/kubepods/besteffort/podd144c9e8/e2ac8ceb3a09":                                         "d144c9e8",
		"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podab12_cd.slice/cri-containerd-x.scope": "ab12-cd",
		"/user.slice": "",
	} {
		if got := PodUIDFromCgroup(path); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
}
