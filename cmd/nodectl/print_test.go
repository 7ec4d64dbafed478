package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nodeagent/api"
)

// fakeAgent serves a read-only API with one pod, its cgroup and one
// eviction decision.
func fakeAgent(t *testing.T) *httptest.Server {
	started := metav1.NewTime(time.Now().Add(-5*time.Hour - 30*time.Minute)) // "5h" for half an hour either way
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default", UID: "uid-web"},
		Spec:       corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Name: "main", Image: "img"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.88.0.7", QOSClass: corev1.PodQOSBurstable, StartTime: &started,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: true, RestartCount: 2,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}},
	}
	answers := map[string]any{
		"/pods": corev1.PodList{Items: []corev1.Pod{pod}},
		"/cgroups": []api.CgroupEntry{
			{CgroupValues: api.CgroupValues{Name: "/kubepods"}},
			{CgroupValues: api.CgroupValues{Name: "/kubepods/burstable/poduid-web"}, Depth: 2, PodUID: "uid-web"},
		},
		"/evictions": []api.EvictionTrace{{ID: 1, Signal: "memory.available", Threshold: "memory.available<100Mi", Available: 50 << 20, Need: 50 << 20,
			Ranking: "kubelet", ObservedAt: started.Time, WokeAt: started.Time, DecidedAt: started.Time, KillSentAt: started.Time,
			Victims: []api.EvictionVictim{{Pod: "default/hog-node1", QoS: corev1.PodQOSBestEffort, Usage: 300 << 20}}}},
		"/pods/default/web-node1/probes": []api.ProbeReport{},
		"/events":                        corev1.EventList{},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := answers[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(a)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func nodectl(t *testing.T, srv *httptest.Server, args ...string) string {
	t.Helper()
	var out strings.Builder
	if err := run(append([]string{"--server", srv.URL}, args...), &out); err != nil {
		t.Fatalf("nodectl %s: %v", strings.Join(args, " "), err)
	}
	return out.String()
}

func TestGetPodsPrintsOneRowPerPod(t *testing.T) {
	out := nodectl(t, fakeAgent(t), "get", "pods")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a header and one row:\n%s", out)
	}
	if f := strings.Fields(lines[0]); strings.Join(f, " ") != "NAME READY STATUS RESTARTS AGE IP QOS" {
		t.Errorf("header %q", lines[0])
	}
	if f := strings.Fields(lines[1]); len(f) != 7 || f[0] != "web-node1" || f[1] != "1/1" || f[2] != "Running" || f[3] != "2" || f[4] != "5h" || f[5] != "10.88.0.7" || f[6] != "Burstable" {
		t.Errorf("row %q", lines[1])
	}
	if wide := nodectl(t, fakeAgent(t), "get", "pods", "-o", "wide"); !strings.Contains(wide, "node1") || !strings.Contains(wide, "uid-web") {
		t.Errorf("-o wide lacks the node or the UID:\n%s", wide)
	}
}

func TestDescribePodShowsTheCgroupTheAgentReports(t *testing.T) {
	out := nodectl(t, fakeAgent(t), "describe", "pod", "web")
	if !strings.Contains(out, "/kubepods/burstable/poduid-web") {
		t.Errorf("describe pod does not show the pod cgroup from /cgroups:\n%s", out)
	}
}

func TestGetEvictionsNamesSignalAndVictim(t *testing.T) {
	out := nodectl(t, fakeAgent(t), "get", "evictions")
	for _, want := range []string{"memory.available", "default/hog-node1", "BestEffort"} {
		if !strings.Contains(out, want) {
			t.Errorf("get evictions lacks %q:\n%s", want, out)
		}
	}
}

func TestConformanceAndExperimentNeedNodetest(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no nodetest on PATH, none beside the test binary
	for _, verb := range []string{"conformance", "experiment"} {
		err := run([]string{verb, "--list"}, &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), "nodectl "+verb+" runs nodetest") {
			t.Errorf("nodectl %s without nodetest: %v", verb, err)
		}
	}
}
