package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"nodeagent/agent/pods/downward"
	"nodeagent/internal/atomicdir"
)

type files = map[string]atomicdir.File

// content is what volume v holds now, and when it is due to change
// (zero: when an object changes).
func (m *Manager) content(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) (files, time.Time, error) {
	out := files{}
	switch {
	case v.ConfigMap != nil:
		s := v.ConfigMap
		return out, time.Time{}, m.object(ctx, pod, out, "configmap", s.Name, s.Items, mode(s.DefaultMode), s.Optional)
	case v.Secret != nil:
		s := v.Secret
		return out, time.Time{}, m.object(ctx, pod, out, "secret", s.SecretName, s.Items, mode(s.DefaultMode), s.Optional)
	case v.DownwardAPI != nil:
		return out, time.Time{}, m.downwardAPI(pod, out, v.DownwardAPI.Items, mode(v.DownwardAPI.DefaultMode))
	}
	var due time.Time
	def := mode(v.Projected.DefaultMode)
	for i, src := range v.Projected.Sources {
		var err error
		switch {
		case src.ConfigMap != nil:
			s := src.ConfigMap
			err = m.object(ctx, pod, out, "configmap", s.Name, s.Items, def, s.Optional)
		case src.Secret != nil:
			s := src.Secret
			err = m.object(ctx, pod, out, "secret", s.Name, s.Items, def, s.Optional)
		case src.DownwardAPI != nil:
			err = m.downwardAPI(pod, out, src.DownwardAPI.Items, def)
		case src.ServiceAccountToken != nil:
			var at time.Time
			if at, err = m.token(ctx, pod, out, src.ServiceAccountToken, def); err == nil && (due.IsZero() || at.Before(due)) {
				due = at
			}
		default:
			err = fmt.Errorf("sources[%d]: only configMap, secret, downwardAPI and serviceAccountToken projections are supported", i)
		}
		if err != nil {
			return nil, time.Time{}, err
		}
	}
	return out, due, nil
}

// mode is a volume's defaultMode, 0644 when unset (the API server's
// default).
func mode(m *int32) fs.FileMode { return modeOr(m, 0o644) }

// modeOr is an item's mode, def when unset.
func modeOr(m *int32, def fs.FileMode) fs.FileMode {
	if m == nil {
		return def
	}
	return fs.FileMode(*m).Perm()
}

// project adds data's keys to out: all of them as files named after the
// key, or the items' keys at the items' paths. A missing key is an error
// unless the reference is optional.
func project(out files, kind string, data map[string][]byte, items []corev1.KeyToPath, def fs.FileMode, optional bool) error {
	if len(items) == 0 {
		for k, b := range data {
			out[k] = atomicdir.File{Data: b, Mode: def}
		}
		return nil
	}
	for _, item := range items {
		b, ok := data[item.Key]
		if !ok {
			if optional {
				continue
			}
			return fmt.Errorf("%s references non-existent %s key: %s", kind, map[string]string{"configmap": "config", "secret": "secret"}[kind], item.Key)
		}
		out[item.Path] = atomicdir.File{Data: b, Mode: modeOr(item.Mode, def)}
	}
	return nil
}

// object projects a configMap's or a secret's data; a missing object
// projects nothing when the reference is optional.
func (m *Manager) object(ctx context.Context, pod *corev1.Pod, out files, kind, name string, items []corev1.KeyToPath, def fs.FileMode, optional *bool) error {
	if m.objects == nil {
		return errNoAPI
	}
	opt := optional != nil && *optional
	var data map[string][]byte
	var err error
	if kind == "configmap" {
		var cm *corev1.ConfigMap
		if cm, err = m.objects.ConfigMap(ctx, pod.Namespace, name); err == nil {
			data = make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
			for k, v := range cm.Data {
				data[k] = []byte(v)
			}
			maps.Copy(data, cm.BinaryData)
		}
	} else {
		var s *corev1.Secret
		if s, err = m.objects.Secret(ctx, pod.Namespace, name); err == nil {
			data = s.Data
		}
	}
	if apierrors.IsNotFound(err) && opt {
		return nil
	}
	if err != nil {
		return err
	}
	return project(out, kind, data, items, def, opt)
}

// downwardAPI writes the pod's own fields; a volume has no pod IP (the
// API server refuses status.podIP there).
func (m *Manager) downwardAPI(pod *corev1.Pod, out files, items []corev1.DownwardAPIVolumeFile, def fs.FileMode) error {
	for _, item := range items {
		var value string
		var err error
		switch {
		case item.FieldRef != nil:
			value, err = downward.FieldRef(pod, item.FieldRef.FieldPath, m.hostIP, "")
		case item.ResourceFieldRef != nil:
			value, err = downward.ResourceFieldRef(pod, nil, item.ResourceFieldRef, m.allocatable)
		default:
			err = errors.New("neither fieldRef nor resourceFieldRef is set")
		}
		if err != nil {
			return fmt.Errorf("downwardAPI item %q: %w", item.Path, err)
		}
		out[item.Path] = atomicdir.File{Data: []byte(value), Mode: modeOr(item.Mode, def)}
	}
	return nil
}

func (m *Manager) token(ctx context.Context, pod *corev1.Pod, out files, p *corev1.ServiceAccountTokenProjection, def fs.FileMode) (time.Time, error) {
	if m.objects == nil {
		return time.Time{}, errNoAPI
	}
	tok, due, err := m.objects.Token(ctx, pod, p)
	if err != nil {
		return time.Time{}, fmt.Errorf("failed to fetch token: %w", err)
	}
	out[p.Path] = atomicdir.File{Data: []byte(tok), Mode: def}
	return due, nil
}
