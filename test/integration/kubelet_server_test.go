//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"
)

// kubectl runs the control plane's kubectl as cluster-admin.
func (cp *controlPlane) kubectl(stdin io.Reader, args ...string) (string, error) {
	cmd := exec.Command(cp.Bin, append([]string{"kubectl", "--kubeconfig", cp.Admin}, args...)...)
	cmd.Stdin = stdin
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// kubeletGet asks the node's kubelet server directly, as a client with
// the given bearer token ("" for none) or client certificate.
func kubeletGet(t *testing.T, n *node, path, token string, cert *tls.Certificate) (int, string) {
	t.Helper()
	tlsCfg := &tls.Config{InsecureSkipVerify: true} // the node's certificate is self-signed
	if cert != nil {
		tlsCfg.Certificates = []tls.Certificate{*cert}
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	req, _ := http.NewRequest("GET", fmt.Sprintf("https://%s:%d%s", n.agent.Address, n.agent.KubeletPort, path), nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body)
}

var lineNumber = regexp.MustCompile(`^line (\d+)$`)

// The kubelet server as kubectl reaches it through the API server: logs
// (with a follow across rotations), exec with stdin and with a TTY,
// port-forward; and its own authentication and authorization with real
// tokens and SubjectAccessReviews.
func TestClusterKubeletServer(t *testing.T) {
	n, cp := clusterNode(t, "containerLogMaxSize: 4Ki\ncontainerLogMaxFiles: 5\ncontainerLogMonitorInterval: 1s\n"+
		"authorization:\n  webhook:\n    cacheUnauthorizedTTL: 1s\n")
	n.start()
	ctx := context.Background()
	pod := apiPod("kserver-"+randomHex(3), n.name, func(p *corev1.Pod) {
		p.Spec.Containers[0].Command = []string{"sh", "-c", "trap 'exit 0' TERM; i=0; while true; do echo line $i; i=$((i+1)); sleep 0.02; done"}
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			// Always: a node that ran an older test image keeps it under
			// the same tag, without /echo.
			Name: "web", Image: testImage, ImagePullPolicy: corev1.PullAlways,
			Command: []string{"probe-server", "--tcp=", "--grpc="},
		})
	})
	if _, err := cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := cp.waitAPIPod(t, "default", pod.Name, time.Minute, "Running", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning || condition(p, corev1.PodReady) != corev1.ConditionTrue {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})

	t.Run("logs", func(t *testing.T) {
		out, err := cp.kubectl(nil, "logs", pod.Name, "-c", "main", "--tail=3")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if err != nil || len(lines) != 3 || !lineNumber.MatchString(lines[0]) {
			t.Fatalf("kubectl logs --tail=3: %v\n%s", err, out)
		}
		// A follow of a few seconds spans rotations: every line arrives,
		// in order, none twice.
		logDir := filepath.Join(n.agent.LogsDir, fmt.Sprintf("default_%s_%s", pod.Name, running.UID), "main")
		before, _ := filepath.Glob(filepath.Join(logDir, "0.log.*"))
		fctx, cancel := context.WithTimeout(ctx, 7*time.Second)
		defer cancel()
		cmd := exec.CommandContext(fctx, cp.Bin, "kubectl", "--kubeconfig", cp.Admin, "logs", "-f", pod.Name, "-c", "main")
		var followed bytes.Buffer
		cmd.Stdout = &followed
		cmd.Run() // ends when the context does
		after, _ := filepath.Glob(filepath.Join(logDir, "0.log.*"))
		rotations := 0
		for _, f := range after {
			if !contains(before, f) {
				rotations++
			}
		}
		got := strings.Split(strings.TrimSpace(followed.String()), "\n")
		prev := -1
		for i, l := range got {
			m := lineNumber.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("follow line %d: %q", i, l)
			}
			k, _ := strconv.Atoi(m[1])
			if prev >= 0 && k != prev+1 {
				t.Fatalf("follow went from line %d to line %d (%d rotations during it)", prev, k, rotations)
			}
			prev = k
		}
		t.Logf("followed %d lines across %d rotations", len(got), rotations)
		if rotations == 0 {
			t.Errorf("no rotation happened during the follow (files before %v, after %v): the test did not test it", before, after)
		}

		// Bad options get 400 naming the parameter.
		cert, err := tls.LoadX509KeyPair(filepath.Join(cp.Dir, "pki", "apiserver-kubelet-client.crt"), filepath.Join(cp.Dir, "pki", "apiserver-kubelet-client.key"))
		if err != nil {
			t.Fatal(err)
		}
		for q, want := range map[string]string{"tailLines=-1": "tailLines", "sinceTime=yesterday": "sinceTime", "limitBytes=x": "limitBytes"} {
			code, body := kubeletGet(t, n, "/containerLogs/default/"+pod.Name+"/main?"+q, "", &cert)
			if code != 400 || !strings.HasPrefix(body, want+": invalid value") {
				t.Errorf("?%s: %d %q, want 400 naming %s", q, code, body, want)
			}
		}
	})

	t.Run("exec", func(t *testing.T) {
		// kubectl speaks websocket (v5) to the API server, which speaks
		// SPDY to the node; stdin's end reaches cat.
		out, err := cp.kubectl(strings.NewReader("hello from stdin\n"), "exec", "-i", pod.Name, "-c", "main", "--", "cat")
		if err != nil || out != "hello from stdin\n" {
			t.Errorf("kubectl exec -i cat: %v %q", err, out)
		}
		out, err = cp.kubectl(nil, "exec", pod.Name, "-c", "main", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || !strings.Contains(out, "out\n") || !strings.Contains(out, "err\n") {
			t.Errorf("kubectl exec exit 3: %v %q", err, out)
		}
		// A TTY with a size, over SPDY end to end. The size arrives on its
		// own stream, maybe after the command started: it waits for it.
		req := cp.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(pod.Name).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: "main", Command: []string{"sh", "-c", "until stty size 2>&1 | grep -q '^[1-9]'; do sleep 0.1; done; stty size"}, Stdin: true, Stdout: true, TTY: true}, scheme.ParameterCodec)
		executor, err := remotecommand.NewSPDYExecutor(cp.Config, "POST", req.URL())
		if err != nil {
			t.Fatal(err)
		}
		var tty bytes.Buffer
		sizes := make(chan remotecommand.TerminalSize, 1)
		sizes <- remotecommand.TerminalSize{Width: 123, Height: 45}
		ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err = executor.StreamWithContext(ectx, remotecommand.StreamOptions{Stdin: blockingReader{ectx}, Stdout: &tty, Tty: true, TerminalSizeQueue: sizeQueue(sizes)})
		if err != nil || strings.TrimSpace(tty.String()) != "45 123" {
			t.Errorf("exec -t stty size: %v %q, want \"45 123\"", err, tty.String())
		}
	})

	t.Run("port-forward", func(t *testing.T) {
		local := freePort(t)
		fctx, cancel := context.WithCancel(ctx)
		cmd := exec.CommandContext(fctx, cp.Bin, "kubectl", "--kubeconfig", cp.Admin, "port-forward", "pod/"+pod.Name, fmt.Sprintf("%d:8080", local))
		stdout, _ := cmd.StdoutPipe()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); cmd.Wait() }()
		ready := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "Forwarding from") {
					close(ready)
					break
				}
			}
			io.Copy(io.Discard, stdout)
		}()
		select {
		case <-ready:
		case <-time.After(30 * time.Second):
			t.Fatalf("kubectl port-forward did not start: %s", stderr.String())
		}
		payload := make([]byte, 256<<10)
		rand.Read(payload)
		resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/echo", local), "application/octet-stream", bytes.NewReader(payload))
		if err != nil {
			t.Fatalf("through the forward: %v (%s)", err, stderr.String())
		}
		echoed, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Equal(echoed, payload) {
			t.Errorf("the pod echoed %d bytes, want the %d sent", len(echoed), len(payload))
		}
	})

	t.Run("authn and authz", func(t *testing.T) {
		if code, body := kubeletGet(t, n, "/pods", "", nil); code != 401 || body != "Unauthorized\n" {
			t.Errorf("no credentials: %d %q", code, body)
		}
		if code, body := kubeletGet(t, n, "/pods", "not-a-token", nil); code != 401 || body != "Unauthorized\n" {
			t.Errorf("a bad token: %d %q", code, body)
		}
		sa := "viewer-" + randomHex(3)
		if _, err := cp.Client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer cp.Client.CoreV1().ServiceAccounts("default").Delete(ctx, sa, metav1.DeleteOptions{})
		tr, err := cp.Client.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		token := tr.Status.Token
		want := fmt.Sprintf("Forbidden (user=system:serviceaccount:default:%s, verb=get, resource=nodes, subresource(s)=[pods proxy])\n", sa)
		if code, body := kubeletGet(t, n, "/pods", token, nil); code != 403 || body != want {
			t.Errorf("a token without rights: %d %q, want 403 %q", code, body, want)
		}
		if code, body := kubeletGet(t, n, "/stats/summary", token, nil); code != 403 || !strings.Contains(body, "subresource(s)=[stats]") {
			t.Errorf("stats without rights: %d %q", code, body)
		}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: "default"}}}
		if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer cp.Client.RbacV1().ClusterRoleBindings().Delete(ctx, sa, metav1.DeleteOptions{})
		n.eventually("the granted token is served /pods", 30*time.Second, func() error {
			code, body := kubeletGet(t, n, "/pods", token, nil)
			if code != 200 {
				return fmt.Errorf("%d %q", code, body)
			}
			var list corev1.PodList
			if err := json.Unmarshal([]byte(body), &list); err != nil {
				return err
			}
			for _, p := range list.Items {
				if p.Name == pod.Name {
					return nil
				}
			}
			return fmt.Errorf("pod %s not in /pods", pod.Name)
		})
		// The API server's own client certificate (system:masters).
		cert, err := tls.LoadX509KeyPair(filepath.Join(cp.Dir, "pki", "apiserver-kubelet-client.crt"), filepath.Join(cp.Dir, "pki", "apiserver-kubelet-client.key"))
		if err != nil {
			t.Fatal(err)
		}
		if code, body := kubeletGet(t, n, "/configz", "", &cert); code != 200 || !strings.Contains(body, `"kubeletconfig"`) {
			t.Errorf("configz with the API server's certificate: %d %.200q", code, body)
		}
		// The node proxy: the API server's path to /configz, as the
		// upstream node e2e suite reads it.
		raw, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + n.name + "/proxy/configz").DoRaw(ctx)
		var cfgz struct {
			KubeletConfig struct {
				StaticPodPath string `json:"staticPodPath"`
			} `json:"kubeletconfig"`
		}
		if err != nil || json.Unmarshal(raw, &cfgz) != nil || cfgz.KubeletConfig.StaticPodPath != n.manifests {
			t.Errorf("node proxy /configz: %v %.300s", err, raw)
		}
	})
	if t.Failed() {
		t.Logf("agent log:\n%s", tail(n.logText(), 60))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

// sizeQueue hands out the sizes sent on ch.
type sizeQueue chan remotecommand.TerminalSize

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q
	if !ok {
		return nil
	}
	return &s
}

// blockingReader is a stdin that never sends and ends with ctx.
type blockingReader struct{ ctx context.Context }

func (b blockingReader) Read([]byte) (int, error) {
	<-b.ctx.Done()
	return 0, io.EOF
}
