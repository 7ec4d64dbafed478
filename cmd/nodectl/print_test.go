package main

import (
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"nodeagent/api"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fakeAgent serves a read-only API: two pods, the node, their cgroups,
// one eviction decision and one event. Times are relative to now, so that
// ages print the same in every run. calls counts the requests.
func fakeAgent(t *testing.T) (*httptest.Server, *atomic.Int32) {
	now := time.Now()
	// 20 s past each whole minute: the ages print the same for 40 s.
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d - 20*time.Second)) }
	started, created, restarted := at(5*time.Hour+30*time.Minute), at(5*time.Hour+3*time.Minute), at(12*time.Minute)
	prio := int32(100)
	grace := int64(30)
	tolerate := int64(300)
	web := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default", UID: "uid-web", CreationTimestamp: created,
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"team": "a"}},
		Spec: corev1.PodSpec{NodeName: "node1", Priority: &prio, PriorityClassName: "high", TerminationGracePeriodSeconds: &grace,
			RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{{Name: "main", Image: "img",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
					Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
				ResizePolicy: []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
					{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "conf", MountPath: "/etc/app", ReadOnly: true}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-conf"}}}}},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &tolerate}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.88.0.7", QOSClass: corev1.PodQOSBurstable, StartTime: &started,
			Conditions: []corev1.PodCondition{{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue, Reason: corev1.PodReasonError, ObservedGeneration: 3,
				Message: "cannot decrease memory limits: attempting to set pod memory limit (67108864) below current usage (100663296)"}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: true, RestartCount: 2, ContainerID: "containerd://abc",
				Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
					Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
				State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: restarted}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: restarted}}}}},
	}
	db := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-node1", Namespace: "default", UID: "uid-db", Labels: map[string]string{"app": "db"}},
		Spec:       corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Name: "db", Image: "pg"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort, StartTime: &created,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "db", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}},
	}
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", CreationTimestamp: at(26 * time.Hour),
		Annotations: map[string]string{api.AnnotationCgroupVersion: "v1", api.AnnotationCgroupDriver: "cgroupfs"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}},
			NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.34.2+nodeagent.0.1.0", OSImage: "Debian", KernelVersion: "6.18", ContainerRuntimeVersion: "containerd://1.6.20"}}}
	event := corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web.1", UID: "e1"}, Type: "Warning", Reason: "OOMKilling",
		Message: "Killed process 7 (app) in container main: the memory limit of /kubepods/x was reached", Count: 1,
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-node1", UID: "uid-web", FieldPath: "spec.containers{main}"},
		FirstTimestamp: restarted, LastTimestamp: restarted, Source: corev1.EventSource{Component: "nodeagent"}}
	answers := map[string]any{
		"/pods": corev1.PodList{Items: []corev1.Pod{web, db}},
		"/node": node,
		"/cgroups": []api.CgroupEntry{
			{CgroupValues: api.CgroupValues{Name: "/kubepods"}},
			{CgroupValues: api.CgroupValues{Name: "/kubepods/burstable/poduid-web"}, Depth: 2, PodUID: "uid-web"},
		},
		"/evictions": []api.EvictionTrace{{ID: 1, Signal: "memory.available", Threshold: "memory.available<100Mi", Available: 50 << 20, Need: 50 << 20,
			Ranking: "kubelet", ObservedAt: started.Time, WokeAt: started.Time, DecidedAt: started.Time, KillSentAt: started.Time,
			Victims: []api.EvictionVictim{{Pod: "default/hog-node1", QoS: corev1.PodQOSBestEffort, Usage: 300 << 20}}}},
		"/pods/default/web-node1/probes": []api.ProbeReport{},
		"/pods/default/db-node1/probes":  []api.ProbeReport{},
		"/events":                        corev1.EventList{Items: []corev1.Event{event}},
		"/cpus": api.CPUManager{Policy: "static", Reserved: "0", SharedPool: "0,3", Exclusive: []api.CPUAssignment{
			{PodUID: "uid-web", Pod: "default/web-node1", Container: "main", CPUs: "1-2"}}},
	}
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		a, ok := answers[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(a)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// nodectl runs a command line against srv and returns stdout and stderr.
func nodectl(t *testing.T, srv *httptest.Server, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut strings.Builder
	err := run(append([]string{"--server", srv.URL, "--control-socket", filepath.Join(t.TempDir(), "none.sock")}, args...), &out, &errOut)
	return out.String(), errOut.String(), err
}

func mustRun(t *testing.T, srv *httptest.Server, args ...string) string {
	t.Helper()
	out, _, err := nodectl(t, srv, args...)
	if err != nil {
		t.Fatalf("nodectl %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// golden compares out with testdata/NAME (go test -update rewrites it).
func golden(t *testing.T, name, out string) {
	t.Helper()
	file := filepath.Join("testdata", name)
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("%s differs:\n--- got\n%s--- want\n%s", name, out, want)
	}
}

func TestGetPodsAsKubectl(t *testing.T) {
	srv, _ := fakeAgent(t)
	golden(t, "get-pods.txt", mustRun(t, srv, "get", "pods"))
	golden(t, "get-pods-wide.txt", mustRun(t, srv, "get", "po", "-o", "wide"))
	golden(t, "get-pods-custom-columns.txt", mustRun(t, srv, "get", "pods", "-o", "custom-columns=NAME:.metadata.name,IP:.status.podIP,MOUNTS:.spec.containers[*].volumeMounts[*].mountPath"))
	golden(t, "get-node.txt", mustRun(t, srv, "get", "node"))
	golden(t, "get-node-wide.txt", mustRun(t, srv, "get", "nodes", "-owide"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "pods", "-o", "name"}, "pod/db-node1\npod/web-node1\n"},
		{[]string{"get", "pods", "-o", "jsonpath={.items[*].metadata.name}"}, "db-node1 web-node1"},
		{[]string{"get", "pod", "web", "-o", "jsonpath={.status.podIP}"}, "10.88.0.7"},
		{[]string{"get", "pods", "-o", "go-template={{range .items}}{{.metadata.name}}:{{.status.qosClass}} {{end}}"}, "db-node1:BestEffort web-node1:Burstable "},
		{[]string{"get", "pods", "-l", "app=web", "-o", "name"}, "pod/web-node1\n"},
		{[]string{"get", "pods", "-l", "app in (web,db),app!=web", "-o", "name"}, "pod/db-node1\n"},
		{[]string{"get", "pods", "default/web", "db", "-o", "name"}, "pod/web-node1\npod/db-node1\n"},
	} {
		if out := mustRun(t, srv, c.args...); out != c.want {
			t.Errorf("nodectl %q = %q, want %q", c.args, out, c.want)
		}
	}
	columns := filepath.Join(t.TempDir(), "columns")
	os.WriteFile(columns, []byte("NAME:.metadata.name,QOS:.status.qosClass\n"), 0o644)
	if out := mustRun(t, srv, "get", "pods", "-o", "custom-columns-file="+columns); strings.Join(strings.Fields(out), " ") != "NAME QOS db-node1 BestEffort web-node1 Burstable" {
		t.Errorf("-o custom-columns-file:\n%s", out)
	}
	var pod corev1.Pod
	if err := json.Unmarshal([]byte(mustRun(t, srv, "get", "pod", "web", "-o", "json")), &pod); err != nil || pod.Kind != "Pod" || pod.Name != "web-node1" {
		t.Errorf("-o json of one pod: kind %q name %q, %v", pod.Kind, pod.Name, err)
	}
	var list corev1.PodList
	if err := json.Unmarshal([]byte(mustRun(t, srv, "get", "pods", "-o", "json")), &list); err != nil || list.Kind != "List" || len(list.Items) != 2 {
		t.Errorf("-o json of pods: kind %q, %d items, %v", list.Kind, len(list.Items), err)
	}
	if out := mustRun(t, srv, "get", "pods", "-o", "yaml"); !strings.HasPrefix(out, "apiVersion: v1\nitems:\n") {
		t.Errorf("-o yaml:\n%s", out)
	}
}

func TestDescribeShowsWhatKubectlShows(t *testing.T) {
	srv, calls := fakeAgent(t)
	out := mustRun(t, srv, "describe", "pod", "web")
	for _, want := range []string{
		"Cgroup:", "/kubepods/burstable/poduid-web", // from /cgroups: nodectl computes no path
		"Priority Class Name: high", "Priority:", "100",
		"Annotations:", "team=a",
		"Mount:", "/data from data (rw)", "/etc/app from conf (ro)",
		"Volumes:\n  data:\n    EmptyDir", "  conf:\n    ConfigMap app-conf",
		"Tolerations:    node.kubernetes.io/not-ready:NoExecute op=Exists for 300s",
		"Warning  OOMKilling", "Killed process 7 (app) in container main",
		// An in-place resize refused: what it is, and what still runs.
		"Resize:              in progress, Error: cannot decrease memory limits", "(generation 3)",
		"Running With:", "limits memory=128Mi", "Resize Restarts For: memory",
		"Exclusive CPUs:      1-2", // from /cpus
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe pod web lacks %q:\n%s", want, out)
		}
	}
	// Dates move with the clock: the golden file has DATE in their place.
	golden(t, "describe-pod.txt", rfc1123.ReplaceAllString(out, "DATE"))
	golden(t, "describe-node.txt", mustRun(t, srv, "describe", "node"))
	before := calls.Load()
	all := mustRun(t, srv, "describe", "pods")
	// The pods, cgroups, CPUs and events once; each pod's probes.
	if n := calls.Load() - before; n != 4+2 {
		t.Errorf("describe pods of 2 pods asked the agent %d times, want 6", n)
	}
	if strings.Count(all, "\nNamespace:") != 2 || !strings.Contains(all, "Name:") {
		t.Errorf("describe pods does not describe both pods:\n%s", all)
	}
	if one := mustRun(t, srv, "describe", "pods", "-l", "app=db"); strings.Contains(one, "web-node1") || !strings.Contains(one, "db-node1") {
		t.Errorf("describe pods -l app=db:\n%s", one)
	}
}

var rfc1123 = regexp.MustCompile(`[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} [-+]\d{4}`)

func TestEventsAsKubectl(t *testing.T) {
	srv, _ := fakeAgent(t)
	golden(t, "events.txt", mustRun(t, srv, "events", "--for", "pod/web"))
	if out := mustRun(t, srv, "events", "--pod", "db"); out != "" {
		t.Errorf("events of a pod without any: %q", out)
	}
}

func TestGetEvictionsNamesSignalAndVictim(t *testing.T) {
	srv, _ := fakeAgent(t)
	out := mustRun(t, srv, "get", "evictions")
	for _, want := range []string{"memory.available", "default/hog-node1", "BestEffort"} {
		if !strings.Contains(out, want) {
			t.Errorf("get evictions lacks %q:\n%s", want, out)
		}
	}
}

// Bad input is one line naming what was wrong, a non-zero exit, and no
// call to the agent before it.
func TestBadInputFailsBeforeAnyCall(t *testing.T) {
	srv, calls := fakeAgent(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "pods", "-o", "table"}, `unable to match a printer suitable for the output format "table", allowed formats are: json,yaml,wide,name,jsonpath=...`},
		{[]string{"get", "pods", "-o", "jsonpath={.items[}"}, "-o jsonpath={.items[}:"},
		{[]string{"get", "pods", "-o", "go-template={{.x"}, "-o go-template={{.x:"},
		{[]string{"get", "pods", "-o", "custom-columns=NAME"}, "expected <header>:<json-path-expr>"},
		{[]string{"get", "pods", "-o", "jsonpath-file=/nonexistent/template"}, "-o jsonpath-file: "},
		{[]string{"get", "evictions", "-o", "name"}, `output format "name", allowed formats are: json,yaml`},
		{[]string{"get", "pods", "-l", "app in (web"}, `-l "app in (web"`},
		{[]string{"get", "pods", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"get", "widgets"}, `the server doesn't have a resource type "widgets"`},
		{[]string{"get"}, "requires at least 1 arg(s)"},
		{[]string{"frobnicate"}, `unknown command "frobnicate" for "nodectl"`},
		{[]string{"logs", "web", "--since", "1m", "--since-time", "2026-11-24T10:00:00Z"}, "--since and --since-time cannot be given together"},
		{[]string{"logs", "web", "--limit-bytes", "-5"}, "--limit-bytes -5: must be greater than 0"},
		{[]string{"logs"}, "logs needs one pod name"},
		{[]string{"exec", "web", "sh"}, "exec needs -- before the command"},
		{[]string{"exec", "web", "--"}, "exec needs a command after --"},
		{[]string{"exec", "-it", "--timeout", "5s", "web", "--", "sh"}, "--timeout applies to a command run without -i or -t"},
		{[]string{"events", "-o", "wide"}, `output format "wide", allowed formats are: json,yaml`},
		{[]string{"events", "--for", "node/x"}, `--for "node/x": want pod/NAME`},
		{[]string{"delete", "pod", "web", "--grace-period", "-2"}, "--grace-period -2: must be 0 or more"},
		{[]string{"apply"}, "apply needs -f FILE"},
	} {
		before := calls.Load()
		_, _, err := nodectl(t, srv, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("nodectl %q: error %v, want one line with %q", c.args, err, c.want)
		}
		if n := calls.Load() - before; n != 0 {
			t.Errorf("nodectl %q asked the agent %d times before refusing", c.args, n)
		}
	}
	// What only the agent can answer is an error too, after the call.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "pod", "nope"}, `pods "nope" not found`},
		{[]string{"describe", "pod", "nope"}, `pods "nope" not found`},
		{[]string{"logs", "nope"}, `control socket`}, // logs resolve the pod there, never on the read-only port
		{[]string{"events", "--for", "pod/nope"}, `pods "nope" not found`},
	} {
		if _, _, err := nodectl(t, srv, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("nodectl %q: error %v, want %q", c.args, err, c.want)
		}
	}
	srv.Close()
	_, _, err := nodectl(t, srv, "get", "pods")
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), strings.TrimPrefix(srv.URL, "http://")) {
		t.Errorf("an agent that does not answer: %v; want one line naming it", err)
	}
}

// kubectl's flag spellings: combined short flags, -oname, --output=...
func TestFlagsAreKubectls(t *testing.T) {
	root := newRootCommand(&strings.Builder{}, &strings.Builder{})
	exec, _, err := root.Find([]string{"exec"})
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.ParseFlags([]string{"-itc", "app"}); err != nil {
		t.Fatal(err)
	}
	if i, _ := exec.Flags().GetBool("stdin"); !i {
		t.Error("-itc: no -i")
	}
	if tty, _ := exec.Flags().GetBool("tty"); !tty {
		t.Error("-itc: no -t")
	}
	if c, _ := exec.Flags().GetString("container"); c != "app" {
		t.Errorf("-itc app: container %q", c)
	}
	srv, _ := fakeAgent(t)
	if out := mustRun(t, srv, "get", "pods", "-oname", "--selector=app=db"); out != "pod/db-node1\n" {
		t.Errorf("-oname --selector=app=db: %q", out)
	}
	if out := mustRun(t, srv, "get", "pods", "--output=name", "-lapp=web"); out != "pod/web-node1\n" {
		t.Errorf("--output=name -lapp=web: %q", out)
	}
}

func TestHelpVersionAndCompletion(t *testing.T) {
	srv, _ := fakeAgent(t)
	help := mustRun(t, srv, "logs", "--help")
	for _, want := range []string{"Print a container's log", "nodectl logs web --tail 20 -f", "--since-time", "--all-containers", "Global Flags:", "--server"} {
		if !strings.Contains(help, want) {
			t.Errorf("logs --help lacks %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "Display pods") {
		t.Errorf("logs --help prints other commands' help:\n%s", help)
	}
	out := mustRun(t, srv, "version")
	if !strings.Contains(out, "Client Version: ") || !strings.Contains(out, "Agent Version: v1.34.2+nodeagent.0.1.0") {
		t.Errorf("version:\n%s", out)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if out := mustRun(t, srv, "completion", shell); !strings.Contains(out, "nodectl") || len(out) < 1000 {
			t.Errorf("completion %s: %d bytes", shell, len(out))
		}
	}
	// Pod names complete from the agent.
	if out := mustRun(t, srv, "__complete", "logs", "we"); !strings.HasPrefix(out, "web-node1\n") {
		t.Errorf("completing a pod name: %q", out)
	}
	if out := mustRun(t, srv, "__complete", "get", "p"); !strings.HasPrefix(out, "pods\n") {
		t.Errorf("completing a type: %q", out)
	}
}

func TestConformanceAndExperimentNeedNodetest(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no nodetest on PATH, none beside the test binary
	for _, verb := range []string{"conformance", "experiment"} {
		err := run([]string{verb, "--list"}, &strings.Builder{}, &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), "nodectl "+verb+" runs nodetest") {
			t.Errorf("nodectl %s without nodetest: %v", verb, err)
		}
	}
}

// get pods -w prints the table, then each pod again when its row changes,
// and a pod that went as Terminated.
func TestGetPodsWatchPrintsChanges(t *testing.T) {
	var polls atomic.Int32
	pod := func(phase corev1.PodPhase, ready bool) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default", UID: "u"},
			Spec:   corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Name: "main"}}},
			Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: ready}}}}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var items []corev1.Pod
		switch n := polls.Add(1); {
		case n <= 2:
			items = []corev1.Pod{pod(corev1.PodPending, false)}
		case n <= 4:
			items = []corev1.Pod{pod(corev1.PodRunning, true)}
		}
		json.NewEncoder(w).Encode(corev1.PodList{Items: items})
	}))
	defer srv.Close()
	watchContext = func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for polls.Load() < 6 {
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
		}()
		return ctx, cancel
	}
	out := mustRun(t, srv, "get", "pods", "-w")
	var rows []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		rows = append(rows, f[0]+" "+f[1]+" "+f[2])
	}
	want := []string{"NAME READY STATUS", "web-node1 0/1 Pending", "web-node1 1/1 Running", "web-node1 0/0 Terminated"}
	if strings.Join(rows, "|") != strings.Join(want, "|") {
		t.Errorf("get pods -w printed\n%s\nwant rows %q", out, want)
	}
}

// Whoever answers on the read-only port, a name the API server would
// refuse is not offered to the shell.
func TestCompletionOffersOnlyValidNames(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(corev1.PodList{Items: []corev1.Pod{
			{ObjectMeta: metav1.ObjectMeta{Name: "web-node1"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}, {Name: "$(reboot)"}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "web$(reboot)"}},
		}})
	}))
	defer srv.Close()
	if out := mustRun(t, srv, "__complete", "logs", "web"); !strings.HasPrefix(out, "web-node1\n:") {
		t.Errorf("pod names offered: %q", out)
	}
	if out := mustRun(t, srv, "__complete", "logs", "web-node1", "-c", ""); !strings.HasPrefix(out, "app\n:") {
		t.Errorf("container names offered: %q", out)
	}
}
