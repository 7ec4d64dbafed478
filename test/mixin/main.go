// Command mixin-series lists the series a set of Prometheus rule files
// reads from the kubelet: every metric a selector names, less the rules'
// own recorded series, Prometheus's synthetic `up`, and selectors that name
// another job (kube-state-metrics). The integration test checks that a
// live agent exports each one. It is a module of its own so that the
// agent's go.mod does not take on Prometheus's dependencies.
//
//	mixin-series FILE...
package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert  string `json:"alert"`
			Record string `json:"record"`
			Expr   string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

// Use is one rule's reading of one series.
type Use struct {
	Series string `json:"series"`
	Rule   string `json:"rule"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mixin-series FILE...")
		os.Exit(2)
	}
	uses, err := kubeletSeries(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "mixin-series:", err)
		os.Exit(1)
	}
	out, _ := json.MarshalIndent(uses, "", "  ")
	fmt.Println(string(out))
}

func kubeletSeries(files []string) ([]Use, error) {
	recorded := map[string]bool{}
	var uses []Use
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var rf ruleFile
		if err := yaml.UnmarshalStrict(data, &rf); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		for _, g := range rf.Groups {
			for i, r := range g.Rules {
				name := r.Alert + r.Record
				if name == "" {
					return nil, fmt.Errorf("%s: groups[%s].rules[%d]: neither alert nor record", file, g.Name, i)
				}
				if r.Record != "" {
					recorded[r.Record] = true
				}
				expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %w", file, name, err)
				}
				var bad error
				parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
					vs, ok := node.(*parser.VectorSelector)
					if !ok || bad != nil {
						return nil
					}
					kubelet, err := readsKubelet(vs)
					if err != nil {
						bad = fmt.Errorf("%s: %s: %w", file, name, err)
					} else if kubelet {
						uses = append(uses, Use{Series: vs.Name, Rule: g.Name + "/" + name})
					}
					return nil
				})
				if bad != nil {
					return nil, bad
				}
			}
		}
	}
	uses = slices.DeleteFunc(uses, func(u Use) bool { return recorded[u.Series] || u.Series == "up" })
	slices.SortFunc(uses, func(a, b Use) int {
		return cmp.Or(cmp.Compare(a.Series, b.Series), cmp.Compare(a.Rule, b.Rule))
	})
	return slices.Compact(uses), nil
}

// readsKubelet: the selector names a metric and no job other than the
// kubelet's. A selector that names no single metric cannot be checked: an
// error, not a series silently left out.
func readsKubelet(vs *parser.VectorSelector) (bool, error) {
	if vs.Name == "" {
		return false, fmt.Errorf("selector %s names no single metric", vs)
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == "job" && !m.Matches("kubelet") {
			return false, nil
		}
	}
	return true, nil
}
