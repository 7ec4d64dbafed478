package criconfig

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"nodeagent/agent/pods/downward"
	"nodeagent/agent/source"
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
	optional := func(o *bool) bool { return o != nil && *o }
	// data reads a configMap's or a secret's data once per container.
	cache := map[string]map[string]string{}
	data := func(kind, name string) (map[string]string, error) {
		if d, ok := cache[kind+"/"+name]; ok {
			return d, nil
		}
		if b.objects == nil {
			return nil, fmt.Errorf("couldn't get %s %s/%s: not connected to an API server", kind, pod.Namespace, name)
		}
		d := map[string]string{}
		if kind == "ConfigMap" {
			cm, err := b.objects.ConfigMap(ctx, pod.Namespace, name)
			if err != nil {
				return nil, err
			}
			maps.Copy(d, cm.Data)
		} else {
			s, err := b.objects.Secret(ctx, pod.Namespace, name)
			if err != nil {
				return nil, err
			}
			for k, v := range s.Data {
				d[k] = string(v)
			}
		}
		cache[kind+"/"+name] = d
		return d, nil
	}
	// key reads one key; ok is false for what an optional reference lacks.
	key := func(kind, name, k string, opt *bool) (string, bool, error) {
		d, err := data(kind, name)
		if apierrors.IsNotFound(err) && optional(opt) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		v, ok := d[k]
		if !ok && !optional(opt) {
			return "", false, fmt.Errorf("couldn't find key %s in %s %s/%s", k, kind, pod.Namespace, name)
		}
		return v, ok, nil
	}

	for _, from := range c.EnvFrom {
		kind, name, opt := "ConfigMap", "", (*bool)(nil)
		switch {
		case from.ConfigMapRef != nil:
			name, opt = from.ConfigMapRef.Name, from.ConfigMapRef.Optional
		case from.SecretRef != nil:
			kind, name, opt = "Secret", from.SecretRef.Name, from.SecretRef.Optional
		default:
			continue
		}
		d, err := data(kind, name)
		if apierrors.IsNotFound(err) && optional(opt) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, k := range slices.Sorted(maps.Keys(d)) {
			env.set(from.Prefix+k, d[k])
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
		var err error
		ok := true
		prefix := "env " + e.Name + ": " // the kubelet's own messages for keys go unprefixed
		switch src := e.ValueFrom; {
		case src == nil:
			value = expand.Vars(e.Value, lookup)
		case src.FieldRef != nil:
			value, err = downward.FieldRef(pod, src.FieldRef.FieldPath, b.opts.NodeIP, podIP)
		case src.ResourceFieldRef != nil:
			value, err = downward.ResourceFieldRef(pod, c, src.ResourceFieldRef, b.opts.Allocatable)
		case src.ConfigMapKeyRef != nil:
			ref := src.ConfigMapKeyRef
			value, ok, err = key("ConfigMap", ref.Name, ref.Key, ref.Optional)
			prefix = ""
		case src.SecretKeyRef != nil:
			ref := src.SecretKeyRef
			value, ok, err = key("Secret", ref.Name, ref.Key, ref.Optional)
			prefix = ""
		case src.FileKeyRef != nil:
			value, ok, err = b.fileKey(pod, src.FileKeyRef)
			prefix = ""
		default:
			err = errors.New("only value, fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef and fileKeyRef are supported")
		}
		if err != nil {
			return nil, fmt.Errorf("%s%w", prefix, err)
		}
		if ok {
			env.set(e.Name, value)
		}
	}
	for _, v := range services.vars {
		if _, ok := env.get(v.Name); !ok {
			env.set(v.Name, v.Value)
		}
	}
	return env.vars, nil
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
	if err != nil && source.FromAPI(pod) {
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
