package pullrecords

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"nodeagent/internal/safefile"
)

type (
	record      = kubeletv1beta1.ImagePulledRecord
	credentials = kubeletv1beta1.ImagePullCredentials
)

// maxRecordFile bounds what is read of one record (100 secrets and their
// hashes fit well within it).
const maxRecordFile = 1 << 20

var typeMeta = func(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{Kind: kind, APIVersion: kubeletv1beta1.SchemeGroupVersion.String()}
}

func newRecord(imageRef string, now time.Time) *record {
	return &record{TypeMeta: typeMeta("ImagePulledRecord"), ImageRef: imageRef, LastUpdatedTime: metav1.NewTime(now),
		CredentialMapping: map[string]credentials{}}
}

// addSecret adds s to creds unless it is there, keeping the list sorted by
// namespace, name and UID; it reports whether it added it.
func addSecret(creds *credentials, s Secret) bool {
	for _, k := range creds.KubernetesSecrets {
		if k.UID == s.UID && k.Namespace == s.Namespace && k.Name == s.Name {
			return false
		}
	}
	creds.KubernetesSecrets = append(creds.KubernetesSecrets, kubeletv1beta1.ImagePullSecret{UID: s.UID, Namespace: s.Namespace, Name: s.Name, CredentialHash: s.CredentialHash})
	slices.SortFunc(creds.KubernetesSecrets, func(a, b kubeletv1beta1.ImagePullSecret) int {
		return strings.Compare(a.Namespace+"/"+a.Name+"/"+a.UID, b.Namespace+"/"+b.Name+"/"+b.UID)
	})
	return true
}

func (s *Store) writeIntent(image string) error {
	return write(filepath.Join(s.intentsDir, fileName(image)), kubeletv1beta1.ImagePullIntent{TypeMeta: typeMeta("ImagePullIntent"), Image: image})
}

func (s *Store) removeIntent(image string) {
	os.Remove(filepath.Join(s.intentsDir, fileName(image)))
}

func (s *Store) intentExists(image string) bool {
	_, err := os.Stat(filepath.Join(s.intentsDir, fileName(image)))
	return err == nil
}

// readIntents lists the images of the intents on disk.
func (s *Store) readIntents() ([]string, error) {
	entries, err := os.ReadDir(s.intentsDir)
	if err != nil {
		return nil, fmt.Errorf("image pull intents: %w", err)
	}
	var out []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "sha256-") || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		var in kubeletv1beta1.ImagePullIntent
		path := filepath.Join(s.intentsDir, e.Name())
		if err := read(path, &in); err != nil {
			s.log.Warn("unreadable image pull intent; removed", "file", path, "err", err)
			os.Remove(path)
			continue
		}
		if fileName(in.Image) == e.Name() {
			out = append(out, in.Image)
		}
	}
	return out, nil
}

func (s *Store) writePulled(rec *record) error {
	return write(filepath.Join(s.pulledDir, fileName(rec.ImageRef)), rec)
}

// readPulled is imageRef's record; nil when it has none.
func (s *Store) readPulled(imageRef string) (*record, error) {
	rec, err := s.readPulledFile(fileName(imageRef))
	if err != nil || rec == nil || rec.ImageRef != imageRef {
		return nil, err
	}
	return rec, nil
}

// readPulledFile reads a record; nil when there is none. One that cannot
// be read is an error: the image must then be pulled, never taken for
// preloaded.
func (s *Store) readPulledFile(name string) (*record, error) {
	var rec record
	path := filepath.Join(s.pulledDir, name)
	if err := read(path, &rec); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("image pull record %s: %w", path, err)
	}
	if rec.CredentialMapping == nil {
		rec.CredentialMapping = map[string]credentials{}
	}
	return &rec, nil
}

func write(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return safefile.Write(path, data, 0o600)
}

// read decodes a record strictly: unknown fields are an error, as the
// kubelet's decoder has them.
func read(path string, v any) error {
	data, err := safefile.Read(path, maxRecordFile)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
