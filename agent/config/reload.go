package config

import (
	"reflect"
	"slices"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// Reload is what a running agent takes from next (a re-read file): the
// configuration in effect (cur with next's reloadable fields), and the
// changed fields it applied and those that need a restart.
func Reload(cur, next *Config) (effective *Config, applied, restart []string, err error) {
	applied, restart, err = changed(cur, next)
	if err != nil {
		return nil, nil, nil, err
	}
	fc, err := cur.fields()
	if err != nil {
		return nil, nil, nil, err
	}
	fn, err := next.fields()
	if err != nil {
		return nil, nil, nil, err
	}
	for _, f := range Reloadable {
		if v, ok := fn[f]; ok {
			fc[f] = v
		} else {
			delete(fc, f)
		}
	}
	data, err := yaml.Marshal(fc)
	if err != nil {
		return nil, nil, nil, err
	}
	eff := *cur
	eff.KubeletConfiguration = kubeletv1beta1.KubeletConfiguration{}
	if err := yaml.Unmarshal(data, &eff.KubeletConfiguration); err != nil {
		return nil, nil, nil, err
	}
	return &eff, applied, restart, nil
}

// changed lists the honoured fields whose values differ between a and b,
// split into those a running agent can take and those needing a restart.
func changed(a, b *Config) (reloadable, restart []string, err error) {
	fa, err := a.fields()
	if err != nil {
		return nil, nil, err
	}
	fb, err := b.fields()
	if err != nil {
		return nil, nil, err
	}
	for _, f := range Honoured {
		if reflect.DeepEqual(fa[f], fb[f]) {
			continue
		}
		if slices.Contains(Reloadable, f) {
			reloadable = append(reloadable, f)
		} else {
			restart = append(restart, f)
		}
	}
	return reloadable, restart, nil
}
