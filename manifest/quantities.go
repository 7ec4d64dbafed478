package manifest

import (
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"nodeagent/internal/sat"
)

// rawQuantities mirrors where a Pod holds quantities, as the text it was
// written with, so they can be checked before they are parsed.
type rawQuantities struct {
	Spec struct {
		Containers          []rawContainer             `json:"containers"`
		InitContainers      []rawContainer             `json:"initContainers"`
		EphemeralContainers []rawContainer             `json:"ephemeralContainers"`
		Overhead            map[string]json.RawMessage `json:"overhead"`
		Resources           *rawResources              `json:"resources"`
		Volumes             []struct {
			EmptyDir *struct {
				SizeLimit json.RawMessage `json:"sizeLimit"`
			} `json:"emptyDir"`
		} `json:"volumes"`
	} `json:"spec"`
}

type rawResources struct {
	Requests map[string]json.RawMessage `json:"requests"`
	Limits   map[string]json.RawMessage `json:"limits"`
}

type rawContainer struct {
	Resources rawResources `json:"resources"`
	Env       []struct {
		ValueFrom *struct {
			ResourceFieldRef *struct {
				Divisor json.RawMessage `json:"divisor"`
			} `json:"resourceFieldRef"`
		} `json:"valueFrom"`
	} `json:"env"`
}

// checkQuantityText refuses a quantity written with an exponent beyond
// ±sat.MaxExponent, naming its field, before the Pod is decoded. A document
// that does not decode here is left to the full decode to report.
func checkQuantityText(jsonData []byte) field.ErrorList {
	var raw rawQuantities
	if json.Unmarshal(jsonData, &raw) != nil {
		return nil
	}
	var errs field.ErrorList
	check := func(p *field.Path, v json.RawMessage) {
		if len(v) == 0 {
			return
		}
		text := strings.Trim(string(v), `"`)
		if err := sat.CheckExponent(text); err != nil {
			errs = append(errs, field.Invalid(p, text, err.Error()))
		}
	}
	list := func(p *field.Path, l map[string]json.RawMessage) {
		for k, v := range l {
			check(p.Key(k), v)
		}
	}
	spec := field.NewPath("spec")
	for _, group := range []struct {
		name string
		cs   []rawContainer
	}{{"initContainers", raw.Spec.InitContainers}, {"containers", raw.Spec.Containers}, {"ephemeralContainers", raw.Spec.EphemeralContainers}} {
		for i, c := range group.cs {
			p := spec.Child(group.name).Index(i)
			list(p.Child("resources", "requests"), c.Resources.Requests)
			list(p.Child("resources", "limits"), c.Resources.Limits)
			for j, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil {
					check(p.Child("env").Index(j).Child("valueFrom", "resourceFieldRef", "divisor"), e.ValueFrom.ResourceFieldRef.Divisor)
				}
			}
		}
	}
	list(spec.Child("overhead"), raw.Spec.Overhead)
	if r := raw.Spec.Resources; r != nil {
		list(spec.Child("resources", "requests"), r.Requests)
		list(spec.Child("resources", "limits"), r.Limits)
	}
	for i, v := range raw.Spec.Volumes {
		if v.EmptyDir != nil {
			check(spec.Child("volumes").Index(i).Child("emptyDir", "sizeLimit"), v.EmptyDir.SizeLimit)
		}
	}
	return errs
}
