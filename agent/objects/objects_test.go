package objects

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestReferencesListWhatAPodNames(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{
			{VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
			{VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
			}}}},
		},
		InitContainers:   []corev1.Container{{EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "init"}}}}}},
		Containers:       []corev1.Container{{Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env"}}}}}}},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
	}}
	got := references(p)
	want := []objectKey{{"configmaps", "ns", "cm"}, {"secrets", "ns", "s"}, {"secrets", "ns", "init"}, {"configmaps", "ns", "env"}, {"secrets", "ns", "pull"}}
	if !slices.Equal(got, want) {
		t.Errorf("references %v, want %v", got, want)
	}
}

func TestTokensAreCachedUntilEightyPercentOfTheirLife(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	requests := 0
	var last *authenticationv1.TokenRequest
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		requests++
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest)
		last = tr
		out := tr.DeepCopy()
		out.Status = authenticationv1.TokenRequestStatus{Token: "t" + string(rune('0'+requests)), ExpirationTimestamp: metav1.NewTime(clk.Now().Add(time.Hour))}
		return true, out, nil
	})
	o := NewManager(func(context.Context) (kubernetes.Interface, error) { return client, nil }, func(types.UID) {}, clk, quiet)
	o.cs = client
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}}
	proj := &corev1.ServiceAccountTokenProjection{Path: "token", Audience: "vault", ExpirationSeconds: ptr.To[int64](3600)}
	tok, refresh, err := o.Token(context.Background(), pod, proj)
	if err != nil || tok != "t1" || !refresh.Equal(clk.Now().Add(48*time.Minute)) {
		t.Fatalf("token %q refresh %v err %v", tok, refresh, err)
	}
	if b := last.Spec.BoundObjectRef; b == nil || b.Kind != "Pod" || b.UID != "u1" || !slices.Equal(last.Spec.Audiences, []string{"vault"}) {
		t.Errorf("request %+v: not bound to the pod with the audience", last.Spec)
	}
	clk.Step(47 * time.Minute)
	if tok, _, _ := o.Token(context.Background(), pod, proj); tok != "t1" || requests != 1 {
		t.Errorf("before 80%%: token %q after %d requests, want the cached one", tok, requests)
	}
	clk.Step(2 * time.Minute)
	if tok, _, _ := o.Token(context.Background(), pod, proj); tok != "t2" {
		t.Errorf("after 80%%: token %q, want a new one", tok)
	}
	o.Track(nil)
	if len(o.tokens) != 0 {
		t.Error("the tokens of a pod that left are kept")
	}
}

func TestServicesForAPod(t *testing.T) {
	svc := func(ns, name, ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ClusterIP: ip}}
	}
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range []*corev1.Service{
		svc("default", "kubernetes", "10.0.0.1"), svc("default", "other", "10.0.0.2"),
		svc("app", "web", "10.0.0.3"), svc("app", "headless", corev1.ClusterIPNone),
		svc("else", "db", "10.0.0.4"), svc("mine", "kubernetes", "10.0.0.5"),
	} {
		store.Add(s)
	}
	synced := false
	o := NewManager(nil, func(types.UID) {}, clocktesting.NewFakeClock(time.Now()), quiet)
	o.services, o.synced = store, func() bool { return synced }
	if _, err := o.Services("app", true); err == nil {
		t.Error("services before the first list: no error")
	}
	synced = true
	names := func(ns string, links bool) []string {
		list, err := o.Services(ns, links)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range list {
			out = append(out, s.Namespace+"/"+s.Name)
		}
		return out
	}
	for _, c := range []struct {
		ns    string
		links bool
		want  []string
	}{
		{"app", true, []string{"default/kubernetes", "app/web"}},
		{"app", false, []string{"default/kubernetes"}},
		{"default", true, []string{"default/kubernetes", "default/other"}},
		{"mine", true, []string{"mine/kubernetes"}},
	} {
		if got := names(c.ns, c.links); !slices.Equal(got, c.want) {
			t.Errorf("namespace %s, links %v: %v, want %v", c.ns, c.links, got, c.want)
		}
	}
}
