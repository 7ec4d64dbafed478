// Package pullrecords remembers which credentials pulled each image, so
// that a pod may use an image already on the node only if it could have
// pulled it itself (KEP-2535, the kubelet's image pull manager): an image
// pulled with a pod's pull secret is not there for pods without it.
//
// Records live under the root directory as the kubelet keeps them: an
// ImagePullIntent per pull under way (image_manager/pulling) and an
// ImagePulledRecord per image (image_manager/pulled), JSON of
// kubelet.config.k8s.io/v1beta1, each file named sha256-<hash of its key>.
package pullrecords

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"nodeagent/internal/layout"
)

// The policies of imagePullCredentialsVerificationPolicy.
const (
	NeverVerify                  = "NeverVerify"
	NeverVerifyPreloadedImages   = "NeverVerifyPreloadedImages"
	NeverVerifyAllowlistedImages = "NeverVerifyAllowlistedImages"
	AlwaysVerify                 = "AlwaysVerify"
)

// maxSecrets bounds the secrets one image's record learns by verification.
const maxSecrets = 100

// Secret is a pod's pull secret as a record names it, with a hash of the
// credential it gave for the image's registry.
type Secret struct {
	UID, Namespace, Name, CredentialHash string
}

// Store holds the records and decides.
type Store struct {
	intentsDir, pulledDir string
	policy                string
	allowExact            map[string]bool
	allowPrefixes         []string
	now                   func() time.Time
	log                   *slog.Logger

	mu      sync.Mutex
	pulling map[string]int // pulls under way by image, as asked
}

// Open makes the record directories and takes up what an agent that
// died mid-pull left: an intent for an image the runtime now holds
// becomes a record with no credentials (a pod must show its own).
func Open(root layout.Root, policy string, allowlist []string, images []*runtimeapi.Image, now func() time.Time, log *slog.Logger) (*Store, error) {
	s := &Store{intentsDir: root.ImagePullIntents(), pulledDir: root.ImagesPulled(), policy: policy, allowExact: map[string]bool{},
		now: now, log: log, pulling: map[string]int{}}
	for _, p := range allowlist {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			s.allowPrefixes = append(s.allowPrefixes, prefix)
		} else {
			s.allowExact[p] = true
		}
	}
	for _, d := range []string{s.intentsDir, s.pulledDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("image pull records: %w", err)
		}
	}
	names := map[string]string{} // repo tag or digest -> image ID
	for _, img := range images {
		for _, n := range append(slices.Clone(img.RepoTags), img.RepoDigests...) {
			names[n] = img.Id
		}
	}
	intents, err := s.readIntents()
	if err != nil {
		return nil, err
	}
	for _, image := range intents {
		id, ok := names[image]
		if !ok {
			continue
		}
		// An unreadable record is replaced by one that asks for credentials.
		if rec, err := s.readPulled(id); err != nil || rec == nil {
			if err := s.writePulled(newRecord(id, s.now())); err != nil {
				return nil, err
			}
		}
		s.removeIntent(image)
	}
	return s, nil
}

// Pulling records a pull of image under way, before it starts; done
// records its outcome: the image it gave and the secret that worked (nil:
// anonymous, and any pod on the node may then use the image). A pull
// whose intent cannot be written must not run: cut off, it would leave an
// image that looks preloaded.
func (s *Store) Pulling(image string) (done func(imageRef string, used *Secret, err error), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writeIntent(image); err != nil {
		return nil, fmt.Errorf("record the image pull intent: %w", err)
	}
	s.pulling[image]++
	return func(imageRef string, used *Secret, err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		keep := false
		if err == nil {
			if err := s.recordPulled(image, imageRef, used); err != nil {
				// The intent stays: the next start turns it into a record
				// that asks every pod for credentials.
				s.log.Warn("record image pull", "image", image, "err", err)
				keep = true
			}
		}
		if s.pulling[image]--; s.pulling[image] <= 0 {
			delete(s.pulling, image)
			if !keep {
				s.removeIntent(image)
			}
		}
	}, nil
}

func (s *Store) recordPulled(image, imageRef string, used *Secret) error {
	rec, err := s.readPulled(imageRef)
	if err != nil || rec == nil {
		rec = newRecord(imageRef, s.now()) // an unreadable one is replaced
	}
	key := repository(image)
	creds := rec.CredentialMapping[key]
	switch {
	case creds.NodePodsAccessible:
		return nil
	case used == nil:
		creds = credentials{NodePodsAccessible: true}
	default:
		if !addSecret(&creds, *used) {
			return nil
		}
	}
	rec.CredentialMapping[key] = creds
	rec.LastUpdatedTime.Time = s.now()
	return s.writePulled(rec)
}

// MayUse reports whether a pod whose pull secrets give podSecrets for
// image may use imageRef, already on the node, without pulling it, as the
// kubelet's image pull manager decides: unless the policy exempts the
// image, a record must say the image is every pod's (pulled anonymously)
// or name one of the pod's secrets, by its credential or by its identity
// (a rotated secret). A pod verified by another secret holding the same
// credential is added to the record.
func (s *Store) MayUse(image, imageRef string, podSecrets []Secret) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.readPulled(imageRef)
	if err != nil {
		return false, err // must pull
	}
	byAgent := rec != nil || s.pulling[image] > 0 || s.intentExists(image)
	if !s.mustVerify(image, byAgent) {
		return true, nil
	}
	if rec == nil {
		return false, nil
	}
	key := repository(image)
	creds, ok := rec.CredentialMapping[key]
	if !ok {
		return false, nil
	}
	if creds.NodePodsAccessible {
		return true, nil
	}
	for _, ps := range podSecrets {
		for i, known := range creds.KubernetesSecrets {
			sameSecret := known.UID == ps.UID && known.Namespace == ps.Namespace && known.Name == ps.Name
			sameCredential := known.CredentialHash != "" && known.CredentialHash == ps.CredentialHash
			if !sameSecret && !sameCredential {
				continue
			}
			changed := false
			switch {
			case sameSecret && !sameCredential && len(creds.KubernetesSecrets) < maxSecrets:
				creds.KubernetesSecrets[i].CredentialHash, changed = ps.CredentialHash, true
			case !sameSecret && len(creds.KubernetesSecrets) < maxSecrets:
				changed = addSecret(&creds, ps)
			}
			if changed {
				rec.CredentialMapping[key] = creds
				rec.LastUpdatedTime.Time = s.now()
				if err := s.writePulled(rec); err != nil {
					s.log.Warn("update image pull record", "image", image, "err", err)
				}
			}
			return true, nil
		}
	}
	return false, nil
}

// Prune removes the records of images the runtime no longer holds (after
// image GC), so a later pull of another image by the same ID is not taken
// for theirs. present was listed at listed: a record written since then
// is of a pull the list may not show, and stays.
func (s *Store) Prune(present map[string]bool, listed time.Time) {
	until := listed.Truncate(time.Second) // records keep whole seconds
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, err := os.ReadDir(s.pulledDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "sha256-") || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		rec, err := s.readPulledFile(e.Name())
		if err != nil || rec == nil || present[rec.ImageRef] || !rec.LastUpdatedTime.Time.Before(until) {
			continue
		}
		os.Remove(s.pulledDir + "/" + e.Name())
	}
}

// mustVerify is the policy: whether a pod must show credentials for an
// image already on the node (byAgent: the agent pulled it).
func (s *Store) mustVerify(image string, byAgent bool) bool {
	switch s.policy {
	case NeverVerify:
		return false
	case AlwaysVerify:
		return true
	case NeverVerifyAllowlistedImages:
		return !s.allowlisted(image)
	}
	return byAgent // NeverVerifyPreloadedImages, the default
}

// allowlisted matches the image's repository, as written (not
// normalised), against preloadedImagesVerificationAllowlist.
func (s *Store) allowlisted(image string) bool {
	repo := repository(image)
	if s.allowExact[repo] {
		return true
	}
	for _, p := range s.allowPrefixes {
		if strings.HasPrefix(repo, p) {
			return true
		}
	}
	return false
}

// repository is the image as written without its digest and tag: the key
// of a record's credentials.
func repository(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

// fileName is a record's file: its key hashed.
func fileName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256-" + hex.EncodeToString(sum[:])
}
