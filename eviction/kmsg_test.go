package eviction

import "testing"

func TestParseOOMKill(t *testing.T) {
	// A line this machine's kernel wrote.
	line := "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=e2ac8ceb3a09,mems_allowed=0,oom_memcg=/nodeagent-bench/kubepods,task_memcg=/nodeagent-bench/kubepods/besteffort/podd144c9e8/e2ac8ceb3a09,task=memhog,pid=12441,uid=0\n"
	k, ok := ParseOOMKill(line)
	if !ok || k.PID != 12441 || k.Process != "memhog" || k.Constraint != "CONSTRAINT_MEMCG" ||
		k.OOMMemcg != "/nodeagent-bench/kubepods" || k.TaskMemcg != "/nodeagent-bench/kubepods/besteffort/podd144c9e8/e2ac8ceb3a09" {
		t.Errorf("got %+v %v", k, ok)
	}
	// A node-wide OOM has no oom_memcg.
	k, ok = ParseOOMKill("oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice,task=stress,pid=7,uid=1000")
	if !ok || k.Constraint != "CONSTRAINT_NONE" || k.OOMMemcg != "" || k.Process != "stress" || k.PID != 7 {
		t.Errorf("global: %+v %v", k, ok)
	}
	if _, ok := ParseOOMKill("Memory cgroup out of memory: Killed process 12441 (memhog)"); ok {
		t.Error("the long form is not the summary line")
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
