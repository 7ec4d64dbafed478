package eviction

import (
	"strings"
	"testing"
)

// Kernel log lines: ParseOOMKill and PodUIDFromCgroup take whatever
// /dev/kmsg holds (a process name is the container's to choose).
func FuzzParseOOMKill(f *testing.F) {
	f.Add("oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=abc,mems_allowed=0,oom_memcg=/kubepods/burstable/pod1234,task_memcg=/kubepods/burstable/pod1234/abcd,task=memhog,pid=4242,uid=0")
	f.Add("oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/system.slice/kubepods-besteffort-pod12_34.slice/cri-containerd-x.scope,task=hog,pid=1,uid=0")
	f.Add("Memory cgroup out of memory: Killed process 4242 (memhog)")
	f.Add("oom-kill:constraint=X,task_memcg=,task=,pid=99999999999999999999999")
	f.Fuzz(func(t *testing.T, msg string) {
		k, ok := ParseOOMKill(msg)
		if !ok {
			return
		}
		if !strings.Contains(msg, "oom-kill:constraint=") || k.PID < 0 {
			t.Fatalf("parsed %+v from %q", k, msg)
		}
		for _, v := range []string{k.TaskMemcg, k.OOMMemcg, k.Process} {
			if strings.Contains(v, ",") {
				t.Fatalf("a field ran into the next: %+v", k)
			}
		}
		if uid := PodUIDFromCgroup(k.TaskMemcg); strings.Contains(uid, "/") {
			t.Fatalf("pod UID %q from %q", uid, k.TaskMemcg)
		}
	})
}
