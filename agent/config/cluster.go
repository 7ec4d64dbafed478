package config

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kubeletapis "k8s.io/kubelet/pkg/apis"
)

// ParseNodeLabels reads --node-labels (key=value,...) with the kubelet's
// rule: a label in the kubernetes.io or k8s.io namespaces must be one the
// kubelet may set (node.kubernetes.io/..., kubelet.kubernetes.io/..., the
// well-known topology labels); the API server's NodeRestriction refuses
// the others anyway.
func ParseNodeLabels(s string) (map[string]string, error) {
	labels := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return labels, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("%q: want key=value", kv)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("label %s value %q: %s", k, v, strings.Join(errs, "; "))
		}
		if reservedNamespace(k) && !kubeletapis.IsKubeletLabel(k) {
			return nil, fmt.Errorf("label key %q: a node may not set labels in the kubernetes.io or k8s.io namespaces except node.kubernetes.io/*, kubelet.kubernetes.io/* and %s", k, strings.Join(kubeletapis.KubeletLabels(), ", "))
		}
		labels[k] = v
	}
	return labels, nil
}

func reservedNamespace(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, ns := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == ns || strings.HasSuffix(prefix, "."+ns) {
			return true
		}
	}
	return false
}

var taintEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}

func validateTaint(t corev1.Taint) error {
	if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
		return fmt.Errorf("key %q: %s", t.Key, strings.Join(errs, "; "))
	}
	if t.Value != "" {
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			return fmt.Errorf("value %q: %s", t.Value, strings.Join(errs, "; "))
		}
	}
	if !slices.Contains(taintEffects, t.Effect) {
		return fmt.Errorf("effect %q: want NoSchedule, PreferNoSchedule or NoExecute", t.Effect)
	}
	return nil
}
