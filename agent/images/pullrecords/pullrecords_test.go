package pullrecords

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/internal/layout"
)

const private = "registry.example:5000/team/app:1.0"

var (
	secretA = Secret{UID: "a-uid", Namespace: "ns", Name: "a", CredentialHash: "hash-alice"}
	secretB = Secret{UID: "b-uid", Namespace: "other", Name: "b", CredentialHash: "hash-alice"} // the same credential
	secretC = Secret{UID: "c-uid", Namespace: "ns", Name: "c", CredentialHash: "hash-mallory"}
)

func open(t *testing.T, root layout.Root, policy string, allow []string, images ...*runtimeapi.Image) *Store {
	t.Helper()
	s, err := Open(root, policy, allow, images, time.Now, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mayUse(t *testing.T, s *Store, image, ref string, secrets ...Secret) bool {
	t.Helper()
	ok, err := s.MayUse(image, ref, secrets)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestAnImagePulledWithASecretIsForPodsWithIt(t *testing.T) {
	s := open(t, layout.Root(t.TempDir()), NeverVerifyPreloadedImages, nil)
	pulled(t, s, private, "sha256:app", &secretA, nil)
	for name, c := range map[string]struct {
		secrets []Secret
		want    bool
	}{
		"no secret":                           {nil, false},
		"the secret that pulled it":           {[]Secret{secretA}, true},
		"another secret, the same credential": {[]Secret{secretB}, true},
		"another credential":                  {[]Secret{secretC}, false},
		"among others":                        {[]Secret{secretC, secretA}, true},
	} {
		if got := mayUse(t, s, private, "sha256:app", c.secrets...); got != c.want {
			t.Errorf("%s: may use %v, want %v", name, got, c.want)
		}
	}
	// Secret b was verified by its credential: it is in the record now,
	// so it stays good when rotated.
	rotated := secretB
	rotated.CredentialHash = "hash-new"
	if !mayUse(t, s, private, "sha256:app", rotated) {
		t.Error("a rotated secret the record names is refused")
	}
	// Another tag of the same repository is covered; another repository
	// is not, even for the same image ID.
	if !mayUse(t, s, "registry.example:5000/team/app:2.0", "sha256:app", secretA) || mayUse(t, s, "registry.example:5000/team/other:1.0", "sha256:app", secretA) {
		t.Error("credentials are recorded per repository")
	}
}

func TestAnAnonymousPullIsEveryPods(t *testing.T) {
	s := open(t, layout.Root(t.TempDir()), AlwaysVerify, nil)
	pulled(t, s, private, "sha256:app", &secretA, nil)
	pulled(t, s, private, "sha256:app", nil, nil)
	if !mayUse(t, s, private, "sha256:app") {
		t.Error("an image pulled anonymously needs credentials")
	}
	pulled(t, s, private, "sha256:app", &secretC, nil) // changes nothing now
	if !mayUse(t, s, private, "sha256:app") {
		t.Error("a later pull with a secret took the image away")
	}
}

func TestPolicies(t *testing.T) {
	preloaded := "registry.example:5000/base/os:1"
	for policy, want := range map[string][2]bool{ // preloaded, pulled with secret A (asked without)
		NeverVerify:                {true, true},
		NeverVerifyPreloadedImages: {true, false},
		AlwaysVerify:               {false, false},
	} {
		s := open(t, layout.Root(t.TempDir()), policy, nil)
		pulled(t, s, private, "sha256:app", &secretA, nil)
		if got := mayUse(t, s, preloaded, "sha256:os"); got != want[0] {
			t.Errorf("%s: a preloaded image may be used: %v, want %v", policy, got, want[0])
		}
		if got := mayUse(t, s, private, "sha256:app"); got != want[1] {
			t.Errorf("%s: a secret's image may be used without it: %v, want %v", policy, got, want[1])
		}
	}
	s := open(t, layout.Root(t.TempDir()), NeverVerifyAllowlistedImages, []string{"registry.example:5000/team/*", "registry.example:5000/base/os"})
	pulled(t, s, private, "sha256:app", &secretA, nil)
	for image, want := range map[string]bool{
		private:                             true, // allowlisted, even though a secret pulled it
		preloaded:                           true,
		"registry.example:5000/base/os2:1":  false,
		"registry.example:5000/teamx/app:1": false,
	} {
		if got := mayUse(t, s, image, "sha256:x"); got != want {
			t.Errorf("allowlist: %s may be used: %v, want %v", image, got, want)
		}
	}
}

func TestAPullCutOffLeavesAnImageThatAsksForCredentials(t *testing.T) {
	root := layout.Root(t.TempDir())
	s := open(t, root, NeverVerifyPreloadedImages, nil)
	if _, err := s.Pulling(private); err != nil { // the agent dies before the pull ends
		t.Fatal(err)
	}
	if !s.intentExists(private) {
		t.Fatal("no intent on disk")
	}
	if mayUse(t, s, private, "sha256:app") {
		t.Error("an image being pulled with a secret counts as preloaded")
	}
	s = open(t, root, NeverVerifyPreloadedImages, nil, &runtimeapi.Image{Id: "sha256:app", RepoTags: []string{private}})
	if s.intentExists(private) {
		t.Error("the intent was not taken up")
	}
	if mayUse(t, s, private, "sha256:app") || mayUse(t, s, private, "sha256:app", secretA) {
		t.Error("a pull cut off: its image must be pulled again with the pod's credentials")
	}
}

func TestFailedPullLeavesNoRecordAndPruneForgetsRemovedImages(t *testing.T) {
	root := layout.Root(t.TempDir())
	s := open(t, root, NeverVerifyPreloadedImages, nil)
	pulled(t, s, private, "", &secretA, errors.New("unauthorized"))
	if s.intentExists(private) {
		t.Error("a failed pull left its intent")
	}
	pulled(t, s, private, "sha256:app", &secretA, nil)
	pulled(t, s, "registry.example:5000/team/keep:1", "sha256:keep", nil, nil)
	// A record written after the list was taken stays: its pull may be
	// newer than the list.
	s.Prune(map[string]bool{"sha256:keep": true}, time.Now().Add(-time.Minute))
	if files, _ := os.ReadDir(root.ImagesPulled()); len(files) != 2 {
		t.Errorf("records written after the list were pruned: %d left", len(files))
	}
	s.Prune(map[string]bool{"sha256:keep": true}, time.Now().Add(2*time.Second))
	files, _ := os.ReadDir(root.ImagesPulled())
	if len(files) != 1 || files[0].Name() != fileName("sha256:keep") {
		t.Errorf("records after prune: %v", files)
	}
	data, _ := os.ReadFile(filepath.Join(root.ImagesPulled(), fileName("sha256:keep")))
	for _, want := range []string{`"kind":"ImagePulledRecord"`, `"apiVersion":"kubelet.config.k8s.io/v1beta1"`, `"imageRef":"sha256:keep"`, `"nodePodsAccessible":true`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("record %s lacks %s", data, want)
		}
	}
	// A record that does not parse makes the pod pull, even under the
	// default policy, where no record would mean a preloaded image.
	os.WriteFile(filepath.Join(root.ImagesPulled(), fileName("sha256:bad")), []byte(`{"imageRef":"sha256:bad","surprise":1}`), 0o600)
	if ok, err := open(t, root, NeverVerifyPreloadedImages, nil).MayUse("registry.example:5000/team/bad:1", "sha256:bad", nil); ok || err == nil {
		t.Errorf("an unreadable record: may use %v, err %v; want a pull", ok, err)
	}
	// An intent that cannot be written stops the pull.
	if err := os.RemoveAll(root.ImagePullIntents()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root.ImagePullIntents(), nil, 0o600); err != nil { // not a directory now
		t.Fatal(err)
	}
	if _, err := s.Pulling("registry.example:5000/team/x:1"); err == nil {
		t.Error("a pull ran without its intent on disk")
	}
}

func TestRepository(t *testing.T) {
	for in, want := range map[string]string{
		"busybox":                          "busybox",
		"busybox:1.37":                     "busybox",
		"host:5000/team/app":               "host:5000/team/app",
		"host:5000/team/app:1.0":           "host:5000/team/app",
		"host:5000/team/app@sha256:abc":    "host:5000/team/app",
		"host:5000/team/app:1@sha256:abcd": "host:5000/team/app",
	} {
		if got := repository(in); got != want {
			t.Errorf("repository(%q) = %q, want %q", in, got, want)
		}
	}
}

func pulled(t *testing.T, s *Store, image, ref string, used *Secret, err error) {
	t.Helper()
	done, perr := s.Pulling(image)
	if perr != nil {
		t.Fatal(perr)
	}
	done(ref, used, err)
}
