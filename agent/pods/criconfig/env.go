package criconfig

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"nodeagent/agent/pods/downward"
	"nodeagent/internal/expand"
)

// envList is an environment in order of first definition; a later
// definition replaces the value in place.
type envList struct {
	vars  []corev1.EnvVar
	index map[string]int
}

func (l *envList) set(name, value string) {
	if l.index == nil {
		l.index = map[string]int{}
	}
	if i, ok := l.index[name]; ok {
		l.vars[i].Value = value
		return
	}
	l.index[name] = len(l.vars)
	l.vars = append(l.vars, corev1.EnvVar{Name: name, Value: value})
}

func (l *envList) get(name string) (string, bool) {
	i, ok := l.index[name]
	if !ok {
		return "", false
	}
	return l.vars[i].Value, true
}

// containerEnv resolves the container's environment as the kubelet does:
// envFrom first (configMaps and secrets, prefixed), then env in order
// (literal values expanded against what is defined so far and the service
// variables; the downward API; configMap and secret keys), then the
// service variables nobody defined. A missing object or key is an error
// unless the reference is optional.
func (b *Builder) containerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIP string) ([]corev1.EnvVar, error) {
	services, err := b.serviceEnv(pod)
	if err != nil {
		return nil, err
	}
	var env envList
	configMaps := map[string]*corev1.ConfigMap{}
	secrets := map[string]*corev1.Secret{}
	configMap := func(name string) (*corev1.ConfigMap, error) {
		if cm, ok := configMaps[name]; ok {
			return cm, nil
		}
		if b.objects == nil {
			return nil, fmt.Errorf("couldn't get configMap %s/%s: not connected to an API server", pod.Namespace, name)
		}
		cm, err := b.objects.ConfigMap(ctx, pod.Namespace, name)
		if err == nil {
			configMaps[name] = cm
		}
		return cm, err
	}
	secret := func(name string) (*corev1.Secret, error) {
		if s, ok := secrets[name]; ok {
			return s, nil
		}
		if b.objects == nil {
			return nil, fmt.Errorf("couldn't get secret %s/%s: not connected to an API server", pod.Namespace, name)
		}
		s, err := b.objects.Secret(ctx, pod.Namespace, name)
		if err == nil {
			secrets[name] = s
		}
		return s, err
	}
	optional := func(o *bool) bool { return o != nil && *o }

	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, err := configMap(from.ConfigMapRef.Name)
			if apierrors.IsNotFound(err) && optional(from.ConfigMapRef.Optional) {
				continue
			}
			if err != nil {
				return nil, err
			}
			for _, k := range sortedKeys(cm.Data) {
				env.set(from.Prefix+k, cm.Data[k])
			}
		case from.SecretRef != nil:
			s, err := secret(from.SecretRef.Name)
			if apierrors.IsNotFound(err) && optional(from.SecretRef.Optional) {
				continue
			}
			if err != nil {
				return nil, err
			}
			for _, k := range sortedKeys(s.Data) {
				env.set(from.Prefix+k, string(s.Data[k]))
			}
		}
	}
	lookup := func(name string) (string, bool) {
		if v, ok := env.get(name); ok {
			return v, true
		}
		return services.get(name)
	}
	for _, e := range c.Env {
		var value string
		switch src := e.ValueFrom; {
		case src == nil:
			value = expand.Vars(e.Value, lookup)
		case src.FieldRef != nil:
			v, err := downward.FieldRef(pod, src.FieldRef.FieldPath, b.opts.NodeIP, podIP)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			value = v
		case src.ResourceFieldRef != nil:
			v, err := downward.ResourceFieldRef(pod, c, src.ResourceFieldRef, b.opts.Allocatable)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			value = v
		case src.ConfigMapKeyRef != nil:
			ref := src.ConfigMapKeyRef
			cm, err := configMap(ref.Name)
			if apierrors.IsNotFound(err) && optional(ref.Optional) {
				continue
			}
			if err != nil {
				return nil, err
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				if optional(ref.Optional) {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
			}
			value = v
		case src.SecretKeyRef != nil:
			ref := src.SecretKeyRef
			s, err := secret(ref.Name)
			if apierrors.IsNotFound(err) && optional(ref.Optional) {
				continue
			}
			if err != nil {
				return nil, err
			}
			v, ok := s.Data[ref.Key]
			if !ok {
				if optional(ref.Optional) {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
			}
			value = string(v)
		default:
			return nil, fmt.Errorf("env %s: only value, fieldRef, resourceFieldRef, configMapKeyRef and secretKeyRef are supported", e.Name)
		}
		env.set(e.Name, value)
	}
	for _, v := range services.vars {
		if _, ok := env.get(v.Name); !ok {
			env.set(v.Name, v.Value)
		}
	}
	return env.vars, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// serviceEnv is the service variables of the pod: none without an API
// server. An API pod waits for the services' first list; a static pod
// starts with what is known, as the kubelet's does: it must run while the
// API server is away.
func (b *Builder) serviceEnv(pod *corev1.Pod) (envList, error) {
	var env envList
	if b.objects == nil {
		return env, nil
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	services, err := b.objects.Services(pod.Namespace, links)
	if err != nil && !isStatic(pod) {
		return env, err
	}
	for _, s := range services {
		for _, v := range ServiceVariables(s) {
			env.set(v.Name, v.Value)
		}
	}
	return env, nil
}

// ServiceVariables are a service's variables as the kubelet makes them:
// <NAME>_SERVICE_HOST and _PORT (plus one per named port) and the Docker
// link variables. A service without a cluster IP or ports has none.
func ServiceVariables(s *corev1.Service) []corev1.EnvVar {
	ip := s.Spec.ClusterIP
	if ip == "" || ip == corev1.ClusterIPNone || len(s.Spec.Ports) == 0 {
		return nil
	}
	prefix := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
	port := func(p int32) string { return strconv.Itoa(int(p)) }
	out := []corev1.EnvVar{
		{Name: prefix + "_SERVICE_HOST", Value: ip},
		{Name: prefix + "_SERVICE_PORT", Value: port(s.Spec.Ports[0].Port)},
	}
	for _, sp := range s.Spec.Ports {
		if sp.Name != "" {
			out = append(out, corev1.EnvVar{Name: prefix + "_SERVICE_PORT_" + strings.ToUpper(strings.ReplaceAll(sp.Name, "-", "_")), Value: port(sp.Port)})
		}
	}
	for i, sp := range s.Spec.Ports {
		proto := strings.ToLower(string(sp.Protocol))
		if proto == "" {
			proto = "tcp"
		}
		url := proto + "://" + net.JoinHostPort(ip, port(sp.Port))
		if i == 0 {
			out = append(out, corev1.EnvVar{Name: prefix + "_PORT", Value: url})
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, sp.Port, strings.ToUpper(proto))
		out = append(out,
			corev1.EnvVar{Name: pp, Value: url},
			corev1.EnvVar{Name: pp + "_PROTO", Value: proto},
			corev1.EnvVar{Name: pp + "_PORT", Value: port(sp.Port)},
			corev1.EnvVar{Name: pp + "_ADDR", Value: ip},
		)
	}
	return out
}
