package pods

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"nodeagent/manifest"
	"nodeagent/probes"
)

// What the agent does with every field of the pod types, field by field.
// A module bump that brings a new field fails TestEveryPodFieldIsHandledOrRefused
// until it is classified here, and every field classified refused must
// really be refused (UnsupportedPodSpec, PodFeatureUnsupported or
// InvalidPodSpec), with its path in the message.
const (
	implemented = "implemented"
	refused     = "refused"
	scheduler   = "scheduler" // the scheduler's or the API server's; the kubelet does not act on it either
	windows     = "windows"   // Windows only; os: windows pods are refused
)

// gap marks a field the kubelet acts on that the agent neither
// implements nor refuses yet, with the reason it is not refused.
func gap(why string) string { return "gap: " + why }

var podFields = map[reflect.Type]map[string]string{
	reflect.TypeFor[corev1.PodSpec](): {
		"volumes": implemented, "initContainers": implemented, "containers": implemented, "ephemeralContainers": implemented,
		"restartPolicy": implemented, "terminationGracePeriodSeconds": implemented, "activeDeadlineSeconds": implemented,
		"dnsPolicy": implemented, "serviceAccountName": implemented, "nodeName": implemented, "hostNetwork": implemented,
		"hostPID": implemented, "hostIPC": implemented, "shareProcessNamespace": implemented, "securityContext": implemented,
		"imagePullSecrets": implemented, "hostname": implemented, "subdomain": implemented, "hostAliases": implemented,
		"dnsConfig": implemented, "readinessGates": implemented, "runtimeClassName": implemented, "enableServiceLinks": implemented,
		"overhead": implemented, "setHostnameAsFQDN": implemented, "os": implemented, "hostnameOverride": implemented,
		"priority": implemented, "priorityClassName": implemented, // eviction ranking, critical pods
		"hostUsers": implemented, "resources": implemented, "resourceClaims": refused, // pod-level cpu and memory; hugepages and claims refused
		"nodeSelector":   gap("only kubernetes.io/os is checked at admission; the scheduler placed the pod"),
		"affinity":       gap("required node affinity is not re-checked at admission; the scheduler placed the pod"),
		"tolerations":    gap("NoExecute taints are not checked at admission; the scheduler placed the pod"),
		"serviceAccount": scheduler, "automountServiceAccountToken": scheduler, "schedulerName": scheduler,
		"preemptionPolicy": scheduler, "topologySpreadConstraints": scheduler, "schedulingGates": scheduler,
		"schedulingGroup": scheduler, "evictionResponders": scheduler,
	},
	reflect.TypeFor[corev1.Container](): {
		"name": implemented, "image": implemented, "command": implemented, "args": implemented, "workingDir": implemented,
		"ports": implemented, "envFrom": implemented, "env": implemented, "resources": implemented, "volumeMounts": implemented,
		"livenessProbe": implemented, "readinessProbe": implemented, "startupProbe": implemented, "lifecycle": implemented,
		"terminationMessagePath": implemented, "terminationMessagePolicy": implemented, "imagePullPolicy": implemented,
		"securityContext": implemented, "stdin": implemented, "stdinOnce": implemented, "tty": implemented,
		"restartPolicy": implemented, "restartPolicyRules": implemented, // RestartAllContainers rules: a node feature not declared
		"volumeDevices": refused,     // block volumes need a PVC or an ephemeral volume, both refused
		"resizePolicy":  implemented, // in-place resize: RestartContainer restarts the container (resize.go)
	},
	reflect.TypeFor[corev1.PodSecurityContext](): {
		"runAsUser": implemented, "runAsGroup": implemented, "runAsNonRoot": implemented, "supplementalGroups": implemented,
		"supplementalGroupsPolicy": implemented, "fsGroup": implemented, "sysctls": implemented, "seccompProfile": implemented,
		"appArmorProfile": implemented, "seLinuxOptions": implemented,
		"fsGroupChangePolicy": gap("applies to PersistentVolume-backed volumes only, which are refused"),
		"seLinuxChangePolicy": gap("applies to CSI, iSCSI and FC volumes only, which are refused"),
		"windowsOptions":      windows,
	},
	reflect.TypeFor[corev1.SecurityContext](): {
		"capabilities": implemented, "privileged": implemented, "seLinuxOptions": implemented, "runAsUser": implemented,
		"runAsGroup": implemented, "runAsNonRoot": implemented, "readOnlyRootFilesystem": implemented,
		"allowPrivilegeEscalation": implemented, "procMount": implemented, "seccompProfile": implemented, "appArmorProfile": implemented,
		"windowsOptions": windows,
	},
	reflect.TypeFor[corev1.VolumeSource](): {
		"hostPath": implemented, "emptyDir": implemented, "secret": implemented, "downwardAPI": implemented,
		"configMap": implemented, "projected": implemented,
		"gcePersistentDisk": refused, "awsElasticBlockStore": refused, "gitRepo": refused, "nfs": refused, "iscsi": refused,
		"glusterfs": refused, "persistentVolumeClaim": refused, "rbd": refused, "flexVolume": refused, "cinder": refused,
		"cephfs": refused, "flocker": refused, "fc": refused, "azureFile": refused, "vsphereVolume": refused, "quobyte": refused,
		"azureDisk": refused, "photonPersistentDisk": refused, "portworxVolume": refused, "scaleIO": refused, "storageos": refused,
		"csi": refused, "ephemeral": refused, "image": implemented,
	},
	reflect.TypeFor[corev1.VolumeProjection](): {
		"secret": implemented, "downwardAPI": implemented, "configMap": implemented, "serviceAccountToken": implemented,
		"clusterTrustBundle": refused, "podCertificate": refused,
	},
	reflect.TypeFor[corev1.EnvVarSource](): {
		"fieldRef": implemented, "resourceFieldRef": implemented, "configMapKeyRef": implemented, "secretKeyRef": implemented,
		"fileKeyRef": implemented,
	},
	reflect.TypeFor[corev1.VolumeMount](): {
		"name": implemented, "readOnly": implemented, "recursiveReadOnly": implemented, "mountPath": implemented,
		"subPath": implemented, "mountPropagation": implemented, "subPathExpr": implemented,
		"bindMountOptions": refused, // a node feature the agent does not declare
	},
	reflect.TypeFor[corev1.Lifecycle](): {"postStart": implemented, "preStop": implemented, "stopSignal": refused},
	reflect.TypeFor[corev1.LifecycleHandler](): {
		"exec": implemented, "httpGet": implemented, "sleep": implemented,
		"tcpSocket": refused, // deprecated for hooks: the API server still takes it, the kubelet fails the hook
	},
	reflect.TypeFor[corev1.ProbeHandler]():         {"exec": implemented, "httpGet": implemented, "tcpSocket": implemented, "grpc": implemented},
	reflect.TypeFor[corev1.ResourceRequirements](): {"limits": implemented, "requests": implemented, "claims": refused},
}

// refusedExamples set each refused field that the generic volume and
// projection examples do not cover, on a valid pod from the API.
var refusedExamples = map[string]func(*corev1.Pod){
	"PodSpec.resources": func(p *corev1.Pod) {
		p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}
	},
	"PodSpec.resourceClaims": func(p *corev1.Pod) {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("gpu")}}
	},
	"Container.volumeDevices": func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "block", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}})
		p.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "block", DevicePath: "/dev/xvda"}}
	},
	"ResourceRequirements.claims": func(p *corev1.Pod) {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("gpu")}}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	},
	"VolumeMount.bindMountOptions": func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data", BindMountOptions: []string{"noexec"}}}
	},
	"Lifecycle.stopSignal": func(p *corev1.Pod) {
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{StopSignal: ptr.To(corev1.SIGUSR1)}
	},
	"LifecycleHandler.tcpSocket": func(p *corev1.Pod) {
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{}}}
	},
}

func TestEveryPodFieldIsHandledOrRefused(t *testing.T) {
	for typ, fields := range podFields {
		var names []string
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			names = append(names, name)
			if _, ok := fields[name]; !ok {
				t.Errorf("%s.%s is new: implement it or refuse it (UnsupportedPodSpec), then classify it here", typ.Name(), name)
			}
		}
		for name, how := range fields {
			if !slices.Contains(names, name) {
				t.Errorf("%s.%s is classified %q but the type has no such field", typ.Name(), name, how)
			}
		}
	}
}

// A valid pod from the API with one container and a secret volume.
func apiPod() *corev1.Pod {
	p := &corev1.Pod{}
	p.Name, p.Namespace, p.UID = "p", "ns", "u1"
	p.Annotations = map[string]string{manifest.AnnotationConfigSource: "api"}
	p.Spec.RestartPolicy = corev1.RestartPolicyAlways
	p.Spec.DNSPolicy = corev1.DNSClusterFirst
	p.Spec.Containers = []corev1.Container{{Name: "c", Image: "img", ImagePullPolicy: corev1.PullIfNotPresent,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile, TerminationMessagePath: "/dev/termination-log"}}
	return p
}

// refusal is the admission's verdict on the spec alone, as the manager
// checks it (declaring no node features, as the agent today).
func refusal(p *corev1.Pod) string {
	if errs := append(manifest.Validate(p), probes.Validate(p)...); len(errs) > 0 {
		return "InvalidPodSpec: " + errs.ToAggregate().Error()
	}
	if r := featureAdmit(p, nil); r != nil {
		return r.Reason + ": " + r.Message
	}
	if errs := unsupported(p, true); len(errs) > 0 {
		return "UnsupportedPodSpec: " + errs.ToAggregate().Error()
	}
	return ""
}

func TestRefusedPodFieldsAreRefused(t *testing.T) {
	if r := refusal(apiPod()); r != "" {
		t.Fatalf("the base pod is refused: %s", r)
	}
	for typ, fields := range podFields {
		for name, how := range fields {
			if how != refused {
				continue
			}
			key := typ.Name() + "." + name
			p := apiPod()
			switch set, ok := refusedExamples[key]; {
			case ok:
				set(p)
			case typ == reflect.TypeFor[corev1.VolumeSource]():
				var src corev1.VolumeSource
				f := reflect.ValueOf(&src).Elem().FieldByIndex(fieldIndex(typ, name))
				f.Set(reflect.New(f.Type().Elem()))
				p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: src}}
			case typ == reflect.TypeFor[corev1.VolumeProjection]():
				var src corev1.VolumeProjection
				f := reflect.ValueOf(&src).Elem().FieldByIndex(fieldIndex(typ, name))
				f.Set(reflect.New(f.Type().Elem()))
				p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{src}}}}}
			default:
				t.Errorf("%s is classified refused but has no example in refusedExamples", key)
				continue
			}
			if r := refusal(p); r == "" {
				t.Errorf("%s: a pod setting it is admitted", key)
			} else if !strings.Contains(r, name) && !strings.Contains(strings.ToLower(r), strings.ToLower(name)) && !strings.HasPrefix(r, "PodFeatureUnsupported") {
				t.Errorf("%s: refused without naming it: %s", key, r)
			}
		}
	}
}

func fieldIndex(typ reflect.Type, jsonName string) []int {
	for i := range typ.NumField() {
		if name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); name == jsonName {
			return typ.Field(i).Index
		}
	}
	panic("no field " + jsonName)
}
