package manifest

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// MaxManifestSize is the largest manifest read, as in the kubelet.
const MaxManifestSize = 10 << 20

// ParseManifest turns one manifest (YAML or JSON, one Pod) read from file
// into a static pod for node: defaulted, validated, renamed to
// "<name>-<node>", with a UID derived from its content, the node and the
// file, so the same manifest always yields the same pod. Unknown fields are
// returned as warnings.
func ParseManifest(data []byte, file, node string) (pod *corev1.Pod, warnings []string, err error) {
	if len(data) > MaxManifestSize {
		return nil, nil, fmt.Errorf("manifest is %d bytes, more than the %d allowed", len(data), MaxManifestSize)
	}
	if docs := yamlDocuments(data); docs > 1 {
		return nil, nil, fmt.Errorf("holds %d YAML documents: one Pod per file", docs)
	}
	// One conversion to JSON serves every decode below.
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, nil, fmt.Errorf("not valid YAML or JSON: %w", err)
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(jsonData, &head); err != nil {
		return nil, nil, fmt.Errorf("not valid YAML or JSON: %w", err)
	}
	if head.Kind != "Pod" {
		return nil, nil, fmt.Errorf("kind %q: want Pod", head.Kind)
	}
	if head.APIVersion != "v1" {
		return nil, nil, fmt.Errorf("apiVersion %q: want v1", head.APIVersion)
	}
	if errs := checkQuantityText(jsonData); len(errs) > 0 {
		return nil, nil, errs.ToAggregate()
	}
	pod = &corev1.Pod{}
	if err := json.Unmarshal(jsonData, pod); err != nil {
		return nil, nil, fmt.Errorf("not a valid Pod: %w", err)
	}
	strict := json.NewDecoder(bytes.NewReader(jsonData))
	strict.DisallowUnknownFields()
	if err := strict.Decode(&corev1.Pod{}); err != nil {
		warnings = append(warnings, err.Error())
	}
	if pod.Name == "" {
		return nil, warnings, errors.New("metadata.name: Required value")
	}

	applyDefaults(pod)
	pod.UID = staticPodUID(pod, file, node)
	pod.Name = pod.Name + "-" + strings.ToLower(node)
	pod.Spec.NodeName = node
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationConfigSource] = SourceFile
	pod.Annotations[AnnotationConfigHash] = string(pod.UID)
	pod.Annotations[AnnotationManifest] = file
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending}

	if errs := Validate(pod); len(errs) > 0 {
		return nil, warnings, errs.ToAggregate()
	}
	return pod, warnings, nil
}

// staticPodUID hashes the defaulted pod with the node and the file (FNV-128a),
// as the kubelet derives static pod UIDs: editing the manifest, or moving it,
// makes a new pod.
func staticPodUID(pod *corev1.Pod, file, node string) types.UID {
	h := fnv.New128a()
	fmt.Fprintf(h, "host:%s", node)
	fmt.Fprintf(h, "file:%s", file)
	// Marshalling a typed struct is deterministic (fields in order, map keys sorted).
	b, _ := json.Marshal(pod)
	h.Write(b)
	return types.UID(hex.EncodeToString(h.Sum(nil)))
}

// yamlDocuments counts YAML documents that hold more than comments.
func yamlDocuments(data []byte) int {
	docs, content := 0, false
	for _, line := range bytes.Split(data, []byte("\n")) {
		l := bytes.TrimSpace(line)
		if bytes.Equal(l, []byte("---")) || bytes.HasPrefix(l, []byte("--- ")) {
			if content {
				docs++
			}
			content = false
			continue
		}
		if len(l) > 0 && l[0] != '#' {
			content = true
		}
	}
	if content {
		docs++
	}
	return docs
}
