package volumes

import (
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"nodeagent/internal/layout"
)

const onlyProjections = "only configMap, secret, downwardAPI and serviceAccountToken projections are supported"

// projectedPlugin writes configMap, secret, downwardAPI and
// serviceAccountToken sources into one directory, on a tmpfs; a later
// source's file replaces an earlier one's at the same path.
var projectedPlugin = contentPlugin{
	name:    layout.PluginProjected,
	onTmpfs: true,
	handles: func(v *corev1.Volume) bool { return v.Projected != nil },
	check: func(v *corev1.Volume, p *field.Path, static bool) field.ErrorList {
		var errs field.ErrorList
		for j, src := range v.Projected.Sources {
			sp := p.Child("projected", "sources").Index(j)
			switch {
			case src.DownwardAPI != nil:
			case src.ConfigMap != nil:
				errs = append(errs, apiReference(sp.Child("configMap"), "configMap", static)...)
			case src.Secret != nil:
				errs = append(errs, apiReference(sp.Child("secret"), "secret", static)...)
			case src.ServiceAccountToken != nil:
				errs = append(errs, apiReference(sp.Child("serviceAccountToken"), "serviceAccountToken", static)...)
			default:
				kind := sourceName(reflect.ValueOf(src))
				errs = append(errs, field.Forbidden(sp.Child(kind), kind+" projections are not supported by nodeagent: "+onlyProjections))
			}
		}
		return errs
	},
	resolve: func(ctx context.Context, m *Manager, pod *corev1.Pod, v *corev1.Volume, c *content) error {
		def := mode(v.Projected.DefaultMode)
		for i, src := range v.Projected.Sources {
			var err error
			switch {
			case src.ConfigMap != nil:
				s := src.ConfigMap
				err = m.object(ctx, pod, c, "configmap", s.Name, s.Items, def, s.Optional)
			case src.Secret != nil:
				s := src.Secret
				err = m.object(ctx, pod, c, "secret", s.Name, s.Items, def, s.Optional)
			case src.DownwardAPI != nil:
				err = m.downwardAPI(pod, c, src.DownwardAPI.Items, def)
			case src.ServiceAccountToken != nil:
				err = m.token(ctx, pod, c, src.ServiceAccountToken, def)
			default:
				err = fmt.Errorf("sources[%d]: %s", i, onlyProjections)
			}
			if err != nil {
				return err
			}
		}
		return nil
	},
}
