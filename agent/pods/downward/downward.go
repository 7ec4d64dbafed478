// Package downward evaluates the downward API: the pod's own fields and
// resources, as env values and as the files of downwardAPI volumes.
package downward

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"nodeagent/internal/sat"
)

// FieldRef is the value of a fieldRef. The whole label and annotation maps
// (allowed in volumes only) read as the kubelet writes them: sorted
// key="value" lines.
func FieldRef(pod *corev1.Pod, path, hostIP, podIP string) (string, error) {
	if key, ok := strings.CutPrefix(path, "metadata.labels['"); ok {
		return pod.Labels[strings.TrimSuffix(key, "']")], nil
	}
	if key, ok := strings.CutPrefix(path, "metadata.annotations['"); ok {
		return pod.Annotations[strings.TrimSuffix(key, "']")], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return FormatMap(pod.Labels), nil
	case "metadata.annotations":
		return FormatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return hostIP, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	}
	return "", fmt.Errorf("fieldRef %q is not supported", path)
}

// FormatMap renders a map as the kubelet's downward API files do.
func FormatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k + "=" + strconv.Quote(m[k]))
	}
	return b.String()
}

// ResourceFieldRef renders a limit or request of container c (or of the
// container the ref names) in units of the divisor, rounded up; an unset
// limit reads as the node's allocatable amount.
func ResourceFieldRef(pod *corev1.Pod, c *corev1.Container, ref *corev1.ResourceFieldSelector, allocatable corev1.ResourceList) (string, error) {
	if ref.ContainerName != "" && (c == nil || ref.ContainerName != c.Name) {
		c = nil
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == ref.ContainerName {
				c = &pod.Spec.Containers[i]
			}
		}
	}
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef: container %q not found in the pod", ref.ContainerName)
	}
	kind, name, _ := strings.Cut(ref.Resource, ".")
	var q resource.Quantity
	var ok bool
	switch kind {
	case "limits":
		q, ok = c.Resources.Limits[corev1.ResourceName(name)]
		if !ok {
			q, ok = allocatable[corev1.ResourceName(name)]
		}
	case "requests":
		q, ok = c.Resources.Requests[corev1.ResourceName(name)]
		if !ok {
			q, ok = resource.Quantity{}, true
		}
	}
	if !ok {
		return "", fmt.Errorf("resourceFieldRef %q is not supported", ref.Resource)
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == "cpu" {
		return strconv.FormatInt(ceilDiv(sat.MilliValue(q), sat.MilliValue(divisor)), 10), nil
	}
	return strconv.FormatInt(ceilDiv(sat.Value(q), sat.Value(divisor)), 10), nil
}

// ceilDiv is a/b rounded up, for a >= 0 and b > 0 (validation keeps
// divisors to the API server's list).
func ceilDiv(a, b int64) int64 {
	if b <= 0 {
		return a
	}
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}
