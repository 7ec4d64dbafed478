package criconfig

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

type envObjects struct {
	services []*corev1.Service
	synced   bool
}

func (envObjects) ConfigMap(_ context.Context, _, name string) (*corev1.ConfigMap, error) {
	switch name {
	case "cfg":
		return &corev1.ConfigMap{Data: map[string]string{"B": "from-cm", "A": "a"}}, nil
	case "dashed": // keys the API allows that are not shell identifiers
		return &corev1.ConfigMap{Data: map[string]string{"data-1": "value-1", "data.2": "value-2"}}, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmap"}, name)
}

func (envObjects) Secret(_ context.Context, _, name string) (*corev1.Secret, error) {
	if name == "s" {
		return &corev1.Secret{Data: map[string][]byte{"pw": []byte("x")}}, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secret"}, name)
}

func (o envObjects) Services(string, bool) ([]*corev1.Service, error) {
	if !o.synced {
		return nil, errors.New("services have not yet been read at least once, cannot construct envvars")
	}
	return o.services, nil
}

func TestEnvFromObjectsAndServices(t *testing.T) {
	host := &fakeHost{dir: t.TempDir(), hosts: map[string]string{}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "my-db"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.9",
		Ports: []corev1.ServicePort{{Port: 5432, Protocol: corev1.ProtocolTCP}, {Name: "metrics", Port: 9090, Protocol: corev1.ProtocolUDP}}}}
	b := New(Options{NodeName: "node"}, host, envObjects{services: []*corev1.Service{svc}, synced: true})
	pod := testPod(corev1.RestartPolicyAlways, "c")
	pod.Annotations = map[string]string{"kubernetes.io/config.source": "api"}
	c := &pod.Spec.Containers[0]
	c.EnvFrom = []corev1.EnvFromSource{{Prefix: "P_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Optional: ptr.To(true)}}}
	c.Env = []corev1.EnvVar{
		{Name: "P_B", Value: "override"},
		{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "pw"}}},
		{Name: "URL", Value: "db://$(MY_DB_SERVICE_HOST):$(MY_DB_SERVICE_PORT)"},
		{Name: "MY_DB_SERVICE_HOST", Value: "mine"},
	}
	env, err := b.containerEnv(context.Background(), pod, c, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range env {
		got = append(got, e.Name+"="+e.Value)
	}
	want := "P_A=a P_B=override PW=x URL=db://10.96.0.9:5432 MY_DB_SERVICE_HOST=mine MY_DB_SERVICE_PORT=5432 MY_DB_SERVICE_PORT_METRICS=9090 " +
		"MY_DB_PORT=tcp://10.96.0.9:5432 MY_DB_PORT_5432_TCP=tcp://10.96.0.9:5432 MY_DB_PORT_5432_TCP_PROTO=tcp MY_DB_PORT_5432_TCP_PORT=5432 MY_DB_PORT_5432_TCP_ADDR=10.96.0.9 " +
		"MY_DB_PORT_9090_UDP=udp://10.96.0.9:9090 MY_DB_PORT_9090_UDP_PROTO=udp MY_DB_PORT_9090_UDP_PORT=9090 MY_DB_PORT_9090_UDP_ADDR=10.96.0.9"
	if strings.Join(got, " ") != want {
		t.Errorf("env\n got %s\nwant %s", strings.Join(got, " "), want)
	}

	c.Env = []corev1.EnvVar{{Name: "K", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "missing"}}}}
	if _, err := b.containerEnv(context.Background(), pod, c, ""); err == nil || err.Error() != "couldn't find key missing in ConfigMap default/cfg" {
		t.Errorf("missing key: %v", err)
	}

	// Services not listed yet: an API pod waits, a static pod starts
	// without them (it must run while the API server is away).
	b = New(Options{NodeName: "node"}, host, envObjects{})
	c.Env, c.EnvFrom = nil, nil
	if _, err := b.containerEnv(context.Background(), pod, c, ""); err == nil {
		t.Error("an API pod started before the services were listed")
	}
	delete(pod.Annotations, "kubernetes.io/config.source")
	if _, err := b.containerEnv(context.Background(), pod, c, ""); err != nil {
		t.Errorf("a static pod waits for the services: %v", err)
	}
}

func TestEnvFromKeepsKeysThatAreNotShellIdentifiers(t *testing.T) {
	b := New(Options{NodeName: "node"}, &fakeHost{dir: t.TempDir(), hosts: map[string]string{}}, envObjects{synced: true})
	pod := testPod(corev1.RestartPolicyAlways, "c")
	pod.Annotations = map[string]string{"kubernetes.io/config.source": "api"}
	ref := corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "dashed"}}
	pod.Spec.EnableServiceLinks = ptr.To(false)
	pod.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &ref}, {Prefix: "p-", ConfigMapRef: &ref}}
	env, err := b.containerEnv(context.Background(), pod, &pod.Spec.Containers[0], "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range env {
		got = append(got, e.Name+"="+e.Value)
	}
	if strings.Join(got, " ") != "data-1=value-1 data.2=value-2 p-data-1=value-1 p-data.2=value-2" {
		t.Errorf("env %v", got)
	}
}

// fileKeyRef (1.35): a key of an env file in the pod's volume; a missing
// key fails the container unless optional, and so does a key set to "".
func TestEnvFromFileKeyRef(t *testing.T) {
	host := &fakeHost{dir: t.TempDir(), hosts: map[string]string{}, files: map[string]string{"config/app.env": "HOST='db'\nEMPTY=''\n"}}
	b := New(Options{NodeName: "node"}, host, nil)
	pod := testPod(corev1.RestartPolicyAlways, "c")
	ref := func(key string, optional bool) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "config", Path: "app.env", Key: key, Optional: ptr.To(optional)}}
	}
	c := &pod.Spec.Containers[0]
	c.Env = []corev1.EnvVar{{Name: "DB", ValueFrom: ref("HOST", false)}, {Name: "OPT", ValueFrom: ref("NOPE", true)}, {Name: "OPT2", ValueFrom: ref("EMPTY", true)}}
	env, err := b.containerEnv(context.Background(), pod, c, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range env {
		got = append(got, e.Name+"="+e.Value)
	}
	if strings.Join(got, " ") != "DB=db" {
		t.Errorf("env %v, want DB=db and no optional missing keys", got)
	}
	for _, tc := range []struct {
		ref  *corev1.EnvVarSource
		want string
	}{
		{ref("NOPE", false), `environment variable key "NOPE" not found in file "app.env" of volume "config"`},
		{ref("EMPTY", false), `environment variable key "EMPTY" not found`},
		{&corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "config", Path: "gone.env", Key: "A"}}, `cannot read the env file "gone.env" of volume "config"`},
	} {
		c.Env = []corev1.EnvVar{{Name: "X", ValueFrom: tc.ref}}
		if _, err := b.containerEnv(context.Background(), pod, c, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.ref.FileKeyRef, err, tc.want)
		}
	}
}
