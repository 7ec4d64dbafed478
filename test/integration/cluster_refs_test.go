//go:build integration

package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// namespace makes a namespace of the test's own, deleted after it.
func (cp *controlPlane) namespace(t *testing.T) string {
	t.Helper()
	ns := "t-" + randomHex(4)
	if _, err := cp.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	// Pods are admitted once the controller manager made its service account.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := cp.Client.CoreV1().ServiceAccounts(ns).Get(context.Background(), "default", metav1.GetOptions{})
		if err == nil {
			return ns
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s: no default service account: %v", ns, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func runningAndReady(p *corev1.Pod) error {
	if p.Status.Phase != corev1.PodRunning || condition(p, corev1.PodReady) != corev1.ConditionTrue {
		return fmt.Errorf("phase %s, container statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
	}
	return nil
}

// apiEvents are the kubelet events about a pod in the API server (what
// kubectl get events shows).
func (cp *controlPlane) apiEvents(t *testing.T, p *corev1.Pod) []corev1.Event {
	t.Helper()
	evs, err := cp.Client.CoreV1().Events(p.Namespace).List(context.Background(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(p.UID)).String()})
	if err != nil {
		t.Fatal(err)
	}
	return evs.Items
}

// A pod's configMap and secret arrive as volumes and env; a configMap
// changed under the running container shows in its volume; a missing
// object holds the pod in ContainerCreating with FailedMount until it is
// created.
func TestClusterConfigMapsAndSecretsReachThePod(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	ns := cp.namespace(t)
	core := cp.Client.CoreV1()
	if _, err := core.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"greeting": "hello", "LEVEL": "debug"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, Data: map[string][]byte{"password": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := apiPod("refs", n.name, func(p *corev1.Pod) {
		p.Namespace = ns
		p.Labels = map[string]string{"app": "refs"}
		p.Spec.Volumes = []corev1.Volume{
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
			{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds", DefaultMode: ptr.To[int32](0o400)}}},
			{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
			{Name: "none", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: ptr.To(true)}}},
		}
		c := &p.Spec.Containers[0]
		c.VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}, {Name: "creds", MountPath: "/creds"}, {Name: "info", MountPath: "/info"}, {Name: "none", MountPath: "/none"}}
		c.Env = []corev1.EnvVar{
			{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
			{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "greeting"}}},
			{Name: "MAYBE", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Key: "x", Optional: ptr.To(true)}}},
			{Name: "COMBINED", Value: "$(GREETING)-$(LEVEL)"},
		}
		c.EnvFrom = []corev1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}
	})
	if _, err := core.Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := cp.waitAPIPod(t, ns, pod.Name, time.Minute, "Running and Ready", runningAndReady)
	env, _ := n.execIn(running, "main", "env")
	for _, want := range []string{"PASSWORD=s3cret", "GREETING=hello", "CFG_LEVEL=debug", "CFG_greeting=hello", "COMBINED=hello-$(LEVEL)", "KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443"} {
		if !strings.Contains(env, want+"\n") {
			t.Errorf("env lacks %s:\n%s", want, env)
		}
	}
	if strings.Contains(env, "MAYBE=") {
		t.Error("an optional key of a missing secret was set")
	}
	files, code := n.execIn(running, "main", "sh", "-c", "cat /cfg/greeting; echo; cat /creds/password; echo; stat -L -c %a /creds/password; cat /info/labels; echo; ls -A /none | grep -v '^\\.\\.' | wc -l")
	if code != 0 || files != "hello\ns3cret\n400\napp=\"refs\"\n0\n" {
		t.Errorf("volume content (exit %d):\n%q", code, files)
	}
	if out, code := n.execIn(running, "main", "sh", "-c", "echo x > /cfg/new"); code == 0 {
		t.Errorf("a configMap volume is writable: %s", out)
	}

	// The update arrives through the object's watch, not a periodic resync.
	changed := time.Now()
	cm, _ := core.ConfigMaps(ns).Get(ctx, "cfg", metav1.GetOptions{})
	cm.Data["greeting"] = "bonjour"
	if _, err := core.ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.eventually("the configMap update in the running container", 30*time.Second, func() error {
		if out, _ := n.execIn(running, "main", "cat", "/cfg/greeting"); out != "bonjour" {
			return fmt.Errorf("reads %q", out)
		}
		return nil
	})
	t.Logf("configMap update visible in the container after %s", time.Since(changed).Round(time.Millisecond))
	if now := cp.waitAPIPod(t, ns, pod.Name, time.Second, "still running", runningAndReady); now.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Error("the update restarted the container")
	}

	// A missing configMap: FailedMount, ContainerCreating, then it runs
	// once the object exists.
	blocked := apiPod("blocked", n.name, func(p *corev1.Pod) {
		p.Namespace = ns
		p.Spec.Volumes = []corev1.Volume{{Name: "late", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "late"}}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "late", MountPath: "/late"}}
	})
	created, err := core.Pods(ns).Create(ctx, blocked, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.eventually("a FailedMount event", 30*time.Second, func() error {
		for _, e := range cp.apiEvents(t, created) {
			if e.Reason == "FailedMount" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, `MountVolume.SetUp failed for volume "late" : configmap "late" not found`) {
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	waiting := cp.waitAPIPod(t, ns, blocked.Name, 10*time.Second, "Pending in ContainerCreating", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodPending || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil ||
			p.Status.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" {
			return fmt.Errorf("phase %s, statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	})
	if sbs, _ := n.runtimeObjects(string(waiting.UID)); len(sbs) != 0 {
		t.Error("a pod whose volume is missing got a sandbox")
	}
	if _, err := core.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.waitAPIPod(t, ns, blocked.Name, 30*time.Second, "Running once the configMap exists", runningAndReady)
}

// The service account token is mounted (kube-api-access, as the API
// server's admission adds it) and the API server accepts it as the pod's
// service account.
func TestClusterServiceAccountTokenIsAccepted(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	ns := cp.namespace(t)
	pod := apiPod("token", n.name, func(p *corev1.Pod) {
		p.Namespace = ns
		p.Spec.AutomountServiceAccountToken = nil
	})
	created, err := cp.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(created.Spec.Volumes) == 0 || created.Spec.Volumes[0].Projected == nil {
		t.Fatalf("the API server added no kube-api-access volume: %+v", created.Spec.Volumes)
	}
	running := cp.waitAPIPod(t, ns, pod.Name, time.Minute, "Running and Ready", runningAndReady)
	dir := "/var/run/secrets/kubernetes.io/serviceaccount/"
	token, _ := n.execIn(running, "main", "cat", dir+"token")
	nsFile, _ := n.execIn(running, "main", "cat", dir+"namespace")
	ca, _ := n.execIn(running, "main", "cat", dir+"ca.crt")
	if nsFile != ns || !strings.Contains(ca, "BEGIN CERTIFICATE") {
		t.Errorf("namespace %q, ca.crt %.40q", nsFile, ca)
	}
	anon := rest.AnonymousClientConfig(cp.Config)
	anon.BearerToken = token
	as, err := kubernetes.NewForConfig(anon)
	if err != nil {
		t.Fatal(err)
	}
	review, err := as.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the API server refused the mounted token: %v", err)
	}
	if want := "system:serviceaccount:" + ns + ":default"; review.Status.UserInfo.Username != want {
		t.Errorf("the token authenticates as %q, want %q", review.Status.UserInfo.Username, want)
	}
	if uid := review.Status.UserInfo.Extra["authentication.kubernetes.io/pod-uid"]; len(uid) != 1 || uid[0] != string(created.UID) {
		t.Errorf("the token is not bound to the pod: extra %v", review.Status.UserInfo.Extra)
	}
}

// kubectl create deployment: the scheduler binds the replicas to the node
// and the Deployment reports them ready.
func TestClusterDeploymentRunsOnTheNode(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	ns := cp.namespace(t)
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{"kubernetes.io/hostname": n.name},
					TerminationGracePeriodSeconds: ptr.To[int64](5),
					Containers: []corev1.Container{{Name: "web", Image: testImage, ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"}}},
				},
			},
		},
	}
	if _, err := cp.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.eventually("3 ready replicas", 90*time.Second, func() error {
		d, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ReadyReplicas != 3 || d.Status.AvailableReplicas != 3 {
			return fmt.Errorf("ready %d available %d", d.Status.ReadyReplicas, d.Status.AvailableReplicas)
		}
		return nil
	})
	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	local, err := n.pods()
	if err != nil {
		t.Fatal(err)
	}
	mine := map[string]bool{}
	for _, p := range local {
		mine[p.Namespace+"/"+p.Name] = true
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != n.name || !mine[p.Namespace+"/"+p.Name] {
			t.Errorf("pod %s: node %q, on the agent's /pods: %v", p.Name, p.Spec.NodeName, mine[p.Namespace+"/"+p.Name])
		}
	}
}

// runtimeClassName reaches the runtime as the sandbox's handler; a
// handler the runtime does not have holds the pod with
// FailedCreatePodSandBox. (The API server refuses unknown classes.)
func TestClusterRuntimeClass(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	ns := cp.namespace(t)
	class := "runc-" + randomHex(3)
	if _, err := cp.Client.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Handler: "runc"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bogus := "bogus-" + randomHex(3)
	if _, err := cp.Client.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: bogus}, Handler: "nosuchhandler"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cp.Client.NodeV1().RuntimeClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
		cp.Client.NodeV1().RuntimeClasses().Delete(context.Background(), bogus, metav1.DeleteOptions{})
	})
	good, err := cp.Client.CoreV1().Pods(ns).Create(ctx, apiPod("classed", n.name, func(p *corev1.Pod) { p.Namespace, p.Spec.RuntimeClassName = ns, &class }), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := cp.Client.CoreV1().Pods(ns).Create(ctx, apiPod("unclassed", n.name, func(p *corev1.Pod) { p.Namespace, p.Spec.RuntimeClassName = ns, &bogus }), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cp.waitAPIPod(t, ns, good.Name, time.Minute, "Running", runningAndReady)
	sbs, _ := n.runtimeObjects(string(good.UID))
	if len(sbs) != 1 {
		t.Fatalf("%d sandboxes", len(sbs))
	}
	if st, err := n.cri.PodSandboxStatus(ctx, sbs[0].Id); err != nil || st.RuntimeHandler != "runc" {
		t.Errorf("sandbox runtime handler %q (%v), want runc", st.GetRuntimeHandler(), err)
	}
	n.eventually("FailedCreatePodSandBox for the unknown handler", 30*time.Second, func() error {
		for _, e := range cp.apiEvents(t, bad) {
			if e.Reason == "FailedCreatePodSandBox" && strings.Contains(e.Message, "nosuchhandler") {
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	if sbs, _ := n.runtimeObjects(string(bad.UID)); len(sbs) != 0 {
		t.Error("a pod of an unknown runtime handler got a sandbox")
	}
}

// The agent SIGKILLed while API pods start: once it is back every pod runs
// once (one ready sandbox, one running container, no restart) and the
// API shows them Running.
func TestClusterAgentKilledWhilePodsStart(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	ns := cp.namespace(t)
	const count = 6
	var uids []string
	for i := range count {
		// An init container keeps each start in progress for a second.
		p, err := cp.Client.CoreV1().Pods(ns).Create(ctx, apiPod(fmt.Sprintf("p%d", i), n.name, func(p *corev1.Pod) {
			p.Namespace = ns
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: testImage, ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"sleep", "1"}}}
		}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids = append(uids, string(p.UID))
	}
	n.eventually("the first sandbox", 30*time.Second, func() error {
		for _, uid := range uids {
			if sbs, _ := n.runtimeObjects(uid); len(sbs) > 0 {
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	n.kill()
	started := 0
	for _, uid := range uids {
		_, cs := n.runtimeObjects(uid)
		for _, c := range cs {
			if c.Metadata.Name == "main" {
				started++
			}
		}
	}
	t.Logf("killed with %d of %d pods' app containers created", started, count)
	n.start()
	for i := range count {
		cp.waitAPIPod(t, ns, fmt.Sprintf("p%d", i), time.Minute, "Running and Ready after the restart", runningAndReady)
	}
	for i, uid := range uids {
		sbs, cs := n.runtimeObjects(uid)
		ready, running := 0, 0
		for _, sb := range sbs {
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				ready++
			}
		}
		for _, c := range cs {
			if c.Metadata.Name == "main" && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				running++
			}
		}
		if ready != 1 || running != 1 {
			t.Errorf("pod p%d: %d ready sandboxes and %d running containers, want one each", i, ready, running)
		}
	}
	list, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != count {
		t.Errorf("the API holds %d pods, want %d", len(list.Items), count)
	}
	for _, p := range list.Items {
		if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount != 0 {
			t.Errorf("pod %s: container statuses %+v", p.Name, cs)
		}
	}
}

// authRegistry is a front to the project's registry that asks for basic
// auth (puller:pw); it returns the test image through it, a docker config
// for it and the count of authorized requests.
func authRegistry(t *testing.T, n *node) (image, config string, authorized *atomic.Int32) {
	registry, repo, _ := strings.Cut(testImage, "/")
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: registry})
	authorized = &atomic.Int32{}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, pass, ok := r.BasicAuth(); !ok || user != "puller" || pass != "pw" {
			w.Header().Set("WWW-Authenticate", `Basic realm="nodeagent-test"`)
			http.Error(w, "credentials required", http.StatusUnauthorized)
			return
		}
		authorized.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	host := strings.TrimPrefix(front.URL, "http://")
	image = host + "/" + repo
	t.Cleanup(func() { n.cri.RemoveImage(context.Background(), image) })
	return image, fmt.Sprintf(`{"auths":{%q:{"username":"puller","password":"pw"}}}`, host), authorized
}

func createPullSecret(t *testing.T, cp *controlPlane, ns, name, config string) {
	t.Helper()
	if _, err := cp.Client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(config)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func pullPod(ns, name, node, image string, policy corev1.PullPolicy, secret string) *corev1.Pod {
	return apiPod(name, node, func(p *corev1.Pod) {
		p.Namespace = ns
		p.Spec.Containers[0].Image, p.Spec.Containers[0].ImagePullPolicy = image, policy
		if secret != "" {
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: secret}}
		}
	})
}

func waitingOn(reasons ...string) func(*corev1.Pod) error {
	return func(p *corev1.Pod) error {
		if cs := p.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Waiting != nil && slices.Contains(reasons, cs[0].State.Waiting.Reason) {
			return nil
		}
		return fmt.Errorf("statuses %+v", p.Status.ContainerStatuses)
	}
}

// imagePullSecrets: a registry that wants credentials gets the secret's
// through the CRI; without the secret the pull is refused.
func TestClusterImagePullSecrets(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	ns := cp.namespace(t)
	image, config, authorized := authRegistry(t, n)
	createPullSecret(t, cp, ns, "pull", config)
	for _, p := range []*corev1.Pod{pullPod(ns, "anonymous", n.name, image, corev1.PullAlways, ""), pullPod(ns, "authorized", n.name, image, corev1.PullAlways, "pull")} {
		if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cp.waitAPIPod(t, ns, "authorized", time.Minute, "Running with the secret's credentials", runningAndReady)
	if authorized.Load() == 0 {
		t.Error("the registry front saw no authorized request")
	}
	cp.waitAPIPod(t, ns, "anonymous", 30*time.Second, "refused without credentials", waitingOn("ErrImagePull", "ImagePullBackOff"))
}

// 1.37's default imagePullCredentialsVerificationPolicy
// (NeverVerifyPreloadedImages): an image the node pulled with a pod's
// secret is not there for a pod without credentials for it, whatever its
// pull policy; a pod whose own secret holds the same credential uses it
// without a pull.
func TestClusterPulledImagesNeedThePodsCredentials(t *testing.T) {
	n, cp := clusterNode(t, "")
	n.start()
	ctx := context.Background()
	ns := cp.namespace(t)
	image, config, authorized := authRegistry(t, n)
	createPullSecret(t, cp, ns, "pull", config)
	createPullSecret(t, cp, ns, "same-credential", config)
	create := func(p *corev1.Pod) {
		if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create(pullPod(ns, "owner", n.name, image, corev1.PullIfNotPresent, "pull"))
	cp.waitAPIPod(t, ns, "owner", time.Minute, "Running with the secret's credentials", runningAndReady)
	pulls := authorized.Load()
	create(pullPod(ns, "borrower", n.name, image, corev1.PullIfNotPresent, ""))
	create(pullPod(ns, "never-borrower", n.name, image, corev1.PullNever, ""))
	create(pullPod(ns, "colleague", n.name, image, corev1.PullIfNotPresent, "same-credential"))
	cp.waitAPIPod(t, ns, "colleague", time.Minute, "Running on the image already pulled", runningAndReady)
	cp.waitAPIPod(t, ns, "borrower", time.Minute, "made to pull, and refused", waitingOn("ErrImagePull", "ImagePullBackOff"))
	cp.waitAPIPod(t, ns, "never-borrower", time.Minute, "refused as if the image were absent", waitingOn("ErrImageNeverPull"))
	if got := authorized.Load(); got != pulls {
		t.Errorf("the colleague's start pulled again (%d authorized requests, then %d)", pulls, got)
	}
	records, _ := filepath.Glob(filepath.Join(n.agent.RootDir, "image_manager", "pulled", "sha256-*"))
	var found bool
	for _, r := range records {
		data, _ := os.ReadFile(r)
		found = found || strings.Contains(string(data), `"name":"pull"`) && strings.Contains(string(data), `"name":"same-credential"`)
	}
	if !found {
		t.Errorf("no pull record names both secrets (%d records)", len(records))
	}
}
