package manifest

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const goodPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: main
    image: 127.0.0.1:5050/nodeagent/test:latest
    command: ["sleep", "3600"]
    resources:
      limits: {cpu: 100m, memory: 64Mi}
`

// pod is a one-container manifest with spec fields and a container list.
func pod(specFields, containers string) string {
	if specFields != "" {
		specFields += ", "
	}
	return "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {" + specFields + "containers: " + containers + "}\n"
}

func TestParseManifestStaticPodRules(t *testing.T) {
	pod, warnings, err := ParseManifest([]byte(goodPod), "/m/web.yaml", "Node1")
	if err != nil || len(warnings) > 0 {
		t.Fatalf("err %v warnings %v", err, warnings)
	}
	if pod.Name != "web-node1" || pod.Namespace != "default" || pod.Spec.NodeName != "Node1" {
		t.Errorf("name %q namespace %q node %q", pod.Name, pod.Namespace, pod.Spec.NodeName)
	}
	if len(pod.UID) != 32 || pod.Annotations[AnnotationConfigHash] != string(pod.UID) || pod.Annotations[AnnotationConfigSource] != "file" || pod.Annotations[AnnotationManifest] != "/m/web.yaml" {
		t.Errorf("uid %q annotations %v", pod.UID, pod.Annotations)
	}
	if len(pod.Spec.Tolerations) != 1 || pod.Spec.Tolerations[0].Operator != corev1.TolerationOpExists || pod.Spec.Tolerations[0].Effect != corev1.TaintEffectNoExecute {
		t.Errorf("tolerations %v", pod.Spec.Tolerations)
	}
	c := pod.Spec.Containers[0]
	if c.ImagePullPolicy != corev1.PullAlways || pod.Spec.RestartPolicy != corev1.RestartPolicyAlways || *pod.Spec.TerminationGracePeriodSeconds != 30 || pod.Spec.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("defaults not applied: %+v", pod.Spec)
	}
	if c.Resources.Requests.Cpu().MilliValue() != 100 || c.Resources.Requests.Memory().Value() != 64<<20 {
		t.Errorf("requests must default to limits: %v", c.Resources.Requests)
	}

	again, _, _ := ParseManifest([]byte(goodPod), "/m/web.yaml", "Node1")
	if again.UID != pod.UID {
		t.Error("same manifest, same file, same node must give the same UID")
	}
	for what, other := range map[string]func() (*corev1.Pod, []string, error){
		"content": func() (*corev1.Pod, []string, error) {
			return ParseManifest([]byte(strings.Replace(goodPod, "3600", "3601", 1)), "/m/web.yaml", "Node1")
		},
		"file": func() (*corev1.Pod, []string, error) { return ParseManifest([]byte(goodPod), "/m/web2.yaml", "Node1") },
		"node": func() (*corev1.Pod, []string, error) { return ParseManifest([]byte(goodPod), "/m/web.yaml", "node2") },
	} {
		p, _, err := other()
		if err != nil || p.UID == pod.UID {
			t.Errorf("changing the %s must change the UID (err %v)", what, err)
		}
	}
}

func TestPullPolicyDefaults(t *testing.T) {
	for image, want := range map[string]corev1.PullPolicy{
		"busybox":                corev1.PullAlways,
		"busybox:latest":         corev1.PullAlways,
		"127.0.0.1:5050/x/y:1.0": corev1.PullIfNotPresent,
		"busybox@sha256:" + strings.Repeat("a", 64): corev1.PullIfNotPresent,
	} {
		if got := defaultPullPolicy(image); got != want {
			t.Errorf("%s: %s, want %s", image, got, want)
		}
	}
}

func TestParseManifestErrors(t *testing.T) {
	cases := map[string]struct{ body, want string }{
		"not yaml":              {"::: {", "not valid YAML"},
		"wrong kind":            {"apiVersion: v1\nkind: Service\nmetadata: {name: x}\n", `kind "Service": want Pod`},
		"wrong version":         {"apiVersion: v2\nkind: Pod\nmetadata: {name: x}\n", `apiVersion "v2"`},
		"two documents":         {goodPod + "---\n" + goodPod, "2 YAML documents"},
		"no name":               {"apiVersion: v1\nkind: Pod\nspec: {containers: [{name: a, image: b}]}\n", "metadata.name: Required"},
		"no containers":         {"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {}\n", "spec.containers: Required"},
		"no image":              {"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a}]}\n", "spec.containers[0].image: Required"},
		"dup containers":        {"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: b}, {name: a, image: b}]}\n", "spec.containers[1].name: Duplicate value"},
		"bad restart":           {"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {restartPolicy: Sometimes, containers: [{name: a, image: b}]}\n", "spec.restartPolicy: Unsupported value"},
		"bad container restart": {"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: b, restartPolicy: Sometimes}]}\n", "spec.containers[0].restartPolicy: Unsupported value"},
		"rules without a policy": {"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: b, restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}]}]}\n",
			"spec.containers[0].restartPolicy: Required value: must specify restartPolicy when restart rules are used"},
		"rule without exit codes": {"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: b, restartPolicy: Never, restartPolicyRules: [{action: Restart}]}]}\n",
			"spec.containers[0].restartPolicyRules[0].exitCodes: Required value"},
		"request > limit": {"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: b, resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}}]}\n",
			"spec.containers[0].resources.requests[cpu]: Invalid value"},
		"bad port":  {"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: b, ports: [{containerPort: 70000}]}]}\n", "spec.containers[0].ports[0].containerPort"},
		"bad name":  {"apiVersion: v1\nkind: Pod\nmetadata: {name: Bad_Name}\nspec: {containers: [{name: a, image: b}]}\n", "metadata.name: Invalid value"},
		"bad type":  {"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: 5}\n", "not a valid Pod"},
		"no volume": {"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: b, volumeMounts: [{name: v, mountPath: /v}]}]}\n", "volumeMounts[0].name: Not found"},

		// Found by the audit: each was admitted before.
		"emptyDir name escapes the pod": {pod(`volumes: [{name: ../../../../../../../../tmp/x, emptyDir: {}}]`, `[{name: a, image: b}]`),
			`spec.volumes[0].name: Invalid value: "../../../../../../../../tmp/x": a lowercase RFC 1123 label`},
		"subPath with ..": {pod(`volumes: [{name: v, emptyDir: {}}]`, `[{name: a, image: b, volumeMounts: [{name: v, mountPath: /v, subPath: ../../../../../../../../etc}]}]`),
			`spec.containers[0].volumeMounts[0].subPath: Invalid value: "../../../../../../../../etc": must not contain '..'`},
		"subPath absolute": {pod(`volumes: [{name: v, emptyDir: {}}]`, `[{name: a, image: b, volumeMounts: [{name: v, mountPath: /v, subPath: /etc}]}]`),
			`spec.containers[0].volumeMounts[0].subPath: Invalid value: "/etc": must be a relative path`},
		"subPathExpr with ..": {pod(`volumes: [{name: v, emptyDir: {}}]`, `[{name: a, image: b, volumeMounts: [{name: v, mountPath: /v, subPathExpr: 'x/../../$(HOME)'}]}]`),
			`spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: "x/../../$(HOME)": must not contain '..'`},
		"subPath and subPathExpr": {pod(`volumes: [{name: v, emptyDir: {}}]`, `[{name: a, image: b, volumeMounts: [{name: v, mountPath: /v, subPath: a, subPathExpr: b}]}]`),
			"subPathExpr and subPath are mutually exclusive"},
		"same mountPath twice": {pod(`volumes: [{name: v, emptyDir: {}}]`, `[{name: a, image: b, volumeMounts: [{name: v, mountPath: /v}, {name: v, mountPath: /v/}]}]`),
			`spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/v/": must be unique`},
		"cpu beyond int64": {pod(``, `[{name: a, image: b, resources: {limits: {cpu: 1e30, memory: 1Gi}}}]`),
			`spec.containers[0].resources.limits[cpu]: Invalid value: "1e+30": must be at most 9223372036854775807m`},
		"memory beyond int64": {pod(``, `[{name: a, image: b, resources: {limits: {cpu: 1, memory: 1e19}}}]`),
			`spec.containers[0].resources.limits[memory]: Invalid value: "10E": must be at most 9223372036854775807`},
		"negative request": {pod(``, `[{name: a, image: b, resources: {requests: {memory: -1}}}]`),
			`spec.containers[0].resources.requests[memory]: Invalid value: "-1": must be greater than or equal to 0`},
		"sizeLimit beyond int64": {pod(`volumes: [{name: v, emptyDir: {sizeLimit: 1e20}}]`, `[{name: a, image: b}]`),
			`spec.volumes[0].emptyDir.sizeLimit: Invalid value: "100E"`},
		"overhead beyond int64": {pod(`overhead: {memory: 1e19}`, `[{name: a, image: b}]`), `spec.overhead[memory]: Invalid value`},
		"unmasked /proc as host root": {pod(``, `[{name: a, image: b, securityContext: {procMount: Unmasked}}]`),
			"spec.containers[0].securityContext.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`"},
		"unknown procMount": {pod(`hostUsers: false`, `[{name: a, image: b, securityContext: {procMount: Open}}]`),
			`spec.containers[0].securityContext.procMount: Unsupported value: "Open"`},
		"user namespace with the host network": {pod(`hostUsers: false, hostNetwork: true`, `[{name: a, image: b}]`),
			"spec.hostNetwork: Forbidden: when `hostUsers` is false"},
		"user namespace with host PIDs": {pod(`hostUsers: false, hostPID: true, hostIPC: true`, `[{name: a, image: b}]`),
			"spec.HostPID: Forbidden: when `hostUsers` is false"},
		"activeDeadlineSeconds 0": {pod(`activeDeadlineSeconds: 0`, `[{name: a, image: b}]`),
			"spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 4294967295, inclusive"},
		"bad label": {"apiVersion: v1\nkind: Pod\nmetadata: {name: x, labels: {'a b': c}}\nspec: {containers: [{name: a, image: b}]}\n",
			`metadata.labels: Invalid value: "a b": name part must consist of alphanumeric`},
		"bad annotation": {"apiVersion: v1\nkind: Pod\nmetadata: {name: x, annotations: {'/x': c}}\nspec: {containers: [{name: a, image: b}]}\n",
			`metadata.annotations: Invalid value: "/x"`},
		"bad env name": {pod(``, `[{name: a, image: b, env: [{name: 'A=B', value: c}]}]`), `spec.containers[0].env[0].name: Invalid value: "A=B"`},
		"bad divisor": {pod(``, `[{name: a, image: b, env: [{name: M, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 3}}}]}]`),
			`spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor: Unsupported value: "3"`},
		// A 253-character name is a valid name but its log directory
		// <ns>_<name>_<uid> would be over 255 bytes: the pod could never start.
		"name too long for its log directory": {"apiVersion: v1\nkind: Pod\nmetadata: {name: " + strings.Repeat("a", 240) + "}\nspec: {containers: [{name: a, image: b}]}\n",
			`metadata.name: Invalid value: "` + strings.Repeat("a", 240) + `-n": must be no more than 214 characters in namespace "default"`},
		"too many containers": {pod(``, "["+strings.Repeat("{name: a, image: b},", 257)+"]"), "spec.containers: Too many: 257: must have at most 256 items"},
		// Item paths become files under the volume's directory.
		"downwardAPI path with ..": {pod(`volumes: [{name: v, downwardAPI: {items: [{path: a/../../x, fieldRef: {fieldPath: metadata.name}}]}}]`, `[{name: a, image: b}]`),
			`spec.volumes[0].downwardAPI.items[0].path: Invalid value: "a/../../x": must not contain '..'`},
		"projected item absolute": {pod(`volumes: [{name: v, projected: {sources: [{downwardAPI: {items: [{path: ok, fieldRef: {fieldPath: metadata.name}}]}}, {configMap: {name: c, items: [{key: k, path: /etc/passwd}]}}]}}]`, `[{name: a, image: b}]`),
			`spec.volumes[0].projected.sources[1].configMap.items[0].path: Invalid value: "/etc/passwd": must be a relative path`},
		"secret item starting with ..": {pod(`volumes: [{name: v, secret: {secretName: s, items: [{key: k, path: ..data}]}}]`, `[{name: a, image: b}]`),
			`spec.volumes[0].secret.items[0].path: Invalid value: "..data": must not start with '..'`},
		"hostPath with ..": {pod(`volumes: [{name: v, hostPath: {path: /var/../etc}}]`, `[{name: a, image: b}]`),
			`spec.volumes[0].hostPath.path: Invalid value: "/var/../etc": must not contain '..'`},
		"hostPath type unknown": {pod(`volumes: [{name: v, hostPath: {path: /run/x, type: Pipe}}]`, `[{name: a, image: b}]`),
			`spec.volumes[0].hostPath.type: Unsupported value: "Pipe": supported values: "", "DirectoryOrCreate"`},
		"hostnameOverride not a DNS subdomain": {pod(`hostnameOverride: Not_A_Host`, `[{name: a, image: b}]`),
			`spec.hostnameOverride: Invalid value: "Not_A_Host"`},
		"hostnameOverride with hostNetwork": {pod(`hostnameOverride: x, hostNetwork: true`, `[{name: a, image: b}]`),
			"spec.hostnameOverride: Forbidden: may not be specified when hostNetwork is true"},
		"hostnameOverride with setHostnameAsFQDN": {pod(`hostnameOverride: x, setHostnameAsFQDN: true`, `[{name: a, image: b}]`),
			"spec.hostnameOverride: Forbidden: may not be specified when setHostnameAsFQDN is true"},
		"fileKeyRef to a hostPath": {pod(`volumes: [{name: v, hostPath: {path: /etc}}]`, `[{name: a, image: b, env: [{name: X, valueFrom: {fileKeyRef: {volumeName: v, path: passwd, key: root}}}]}]`),
			`spec.containers[0].env[0].valueFrom.fileKeyRef.volumeName: Invalid value: "v": referenced volume must be of type emptyDir`},
		"fileKeyRef path with ..": {pod(`volumes: [{name: v, emptyDir: {}}]`, `[{name: a, image: b, env: [{name: X, valueFrom: {fileKeyRef: {volumeName: v, path: ../x, key: K}}}]}]`),
			`spec.containers[0].env[0].valueFrom.fileKeyRef.path: Invalid value: "../x": must not contain '..'`},
		"fileKeyRef to no volume": {pod(``, `[{name: a, image: b, env: [{name: X, valueFrom: {fileKeyRef: {volumeName: v, path: x, key: K}}}]}]`),
			`spec.containers[0].env[0].valueFrom.fileKeyRef.volumeName: Not found: "v"`},
		"token path empty": {pod(`volumes: [{name: v, projected: {sources: [{serviceAccountToken: {path: ""}}]}}]`, `[{name: a, image: b}]`),
			`spec.volumes[0].projected.sources[0].serviceAccountToken.path: Required value`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := ParseManifest([]byte(tc.body), "/m/x.yaml", "n")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("want error containing %q, got %v", tc.want, err)
			}
		})
	}
	_, warnings, err := ParseManifest([]byte(strings.Replace(goodPod, "    image:", "    imagee: typo\n    image:", 1)), "/m/x.yaml", "n")
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "imagee") {
		t.Errorf("unknown field must warn: %v %v", warnings, err)
	}
}

func TestHugeGracePeriodIsValid(t *testing.T) {
	// The API server sets no upper bound; the agent saturates what it
	// derives from it (sat.Seconds) instead of refusing it.
	if _, _, err := ParseManifest([]byte(pod(`terminationGracePeriodSeconds: 10000000000`, `[{name: a, image: b}]`)), "/m/x.yaml", "n"); err != nil {
		t.Fatal(err)
	}
}

// Quantities are exact decimals: "1e-100000000" took minutes to parse and
// "1e100000000" minutes to compare. The exponent is checked first, on
// the text, and the field named.
func TestHugeExponentsAreRefusedQuickly(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{pod(``, `[{name: a, image: b, resources: {limits: {cpu: "1e-100000000"}}}]`),
			`spec.containers[0].resources.limits[cpu]: Invalid value: "1e-100000000": exponent must be between -30 and 30`},
		{pod(``, `[{name: a, image: b, resources: {requests: {memory: "1e100000000"}, limits: {memory: "2e100000000"}}}]`),
			`spec.containers[0].resources.requests[memory]: Invalid value: "1e100000000"`},
		{pod(`volumes: [{name: v, emptyDir: {sizeLimit: "5E+99999999"}}]`, `[{name: a, image: b}]`),
			`spec.volumes[0].emptyDir.sizeLimit: Invalid value: "5E+99999999"`},
		{`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"overhead":{"cpu":"1e999999999999"},"containers":[{"name":"a","image":"b"}]}}`,
			`spec.overhead[cpu]: Invalid value: "1e999999999999"`},
	} {
		done := make(chan error, 1)
		go func() { _, _, err := ParseManifest([]byte(tc.body), "/m/x.yaml", "n"); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("still parsing after 5 s: %s", tc.body)
		}
	}
	// Ordinary exponents still work.
	if _, _, err := ParseManifest([]byte(pod(``, `[{name: a, image: b, resources: {limits: {memory: "1e9", cpu: 5e-1}}}]`)), "/m/x.yaml", "n"); err != nil {
		t.Errorf("1e9 bytes and 5e-1 CPUs: %v", err)
	}
}

func TestUserNamespacedPodMayUnmaskProc(t *testing.T) {
	body := pod(`hostUsers: false`, `[{name: a, image: b, securityContext: {procMount: Unmasked}}, {name: c, image: d, securityContext: {procMount: Default}}]`)
	if _, _, err := ParseManifest([]byte(body), "/m/u.yaml", "Node1"); err != nil {
		t.Fatal(err)
	}
}
