package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"

	"nodeagent/internal/cli"
	"nodeagent/internal/safefile"
)

// output is a parsed -o: a format, and its template or columns.
type output struct {
	format string // "" (the table), wide, json, yaml, name, jsonpath, go-template, custom-columns
	arg    string
	p      printers.ResourcePrinter // for the object formats; nil for the tables
}

// objectFormats are what -o takes for Kubernetes objects, as kubectl.
var objectFormats = []string{"json", "yaml", "wide", "name", "jsonpath=...", "jsonpath-as-json=...", "jsonpath-file=...",
	"go-template=...", "go-template-file=...", "custom-columns=...", "custom-columns-file=..."}

// parseOutput reads -o before any call is made, as kubectl refuses a bad
// one first. allowed limits the formats (nil: every object format).
func parseOutput(s string, allowed ...string) (output, error) {
	if s == "" {
		return output{}, nil
	}
	format, arg, hasArg := strings.Cut(s, "=")
	want := objectFormats
	if allowed != nil {
		want = allowed
	}
	ok := false
	for _, w := range want {
		name, _, takesArg := strings.Cut(w, "=")
		if name == format && takesArg == hasArg {
			ok = true
		}
	}
	if !ok {
		return output{}, cli.UsageError(fmt.Sprintf("unable to match a printer suitable for the output format %q, allowed formats are: %s", s, strings.Join(want, ",")))
	}
	o := output{format: format, arg: arg}
	switch format {
	case "jsonpath-file", "go-template-file", "custom-columns-file":
		data, err := safefile.Read(arg, maxTemplateSize)
		if err != nil {
			return output{}, cli.UsageError(fmt.Sprintf("-o %s: %v", format, err))
		}
		o.format, o.arg = strings.TrimSuffix(format, "-file"), strings.TrimSpace(string(data))
	}
	if o.arg == "" && hasArg {
		return output{}, cli.UsageError(fmt.Sprintf("-o %s: the template is empty", format))
	}
	// Templates are parsed now, so that a bad one fails before any call.
	p, err := o.printer()
	if err != nil {
		return output{}, cli.UsageError(fmt.Sprintf("-o %s: %v", s, err))
	}
	o.p = p
	return o, nil
}

// maxTemplateSize bounds a -o *-file read: a template is a few lines.
const maxTemplateSize = 1 << 20

// table reports whether the output is one of the human tables.
func (o output) table() bool { return o.format == "" || o.format == "wide" }

// printer is the cli-runtime printer for the object formats.
func (o output) printer() (printers.ResourcePrinter, error) {
	switch o.format {
	case "json":
		return &printers.JSONPrinter{}, nil
	case "yaml":
		return &printers.YAMLPrinter{}, nil
	case "name":
		return &printers.NamePrinter{}, nil
	case "jsonpath", "jsonpath-as-json":
		p, err := printers.NewJSONPathPrinter(o.arg)
		if err != nil {
			return nil, err
		}
		p.AllowMissingKeys(true)
		p.EnableJSONOutput(o.format == "jsonpath-as-json")
		return p, nil
	case "go-template":
		p, err := printers.NewGoTemplatePrinter([]byte(o.arg))
		if err != nil {
			return nil, err
		}
		p.AllowMissingKeys(true)
		return p, nil
	case "custom-columns":
		return newCustomColumns(o.arg)
	}
	return nil, nil
}

// print writes obj (with its kind set) in an object format.
func (o output) print(obj runtime.Object, w io.Writer) error {
	p := o.p
	if p == nil {
		return fmt.Errorf("no printer for -o %q", o.format)
	}
	if _, ok := p.(*printers.NamePrinter); ok {
		// The name printer reads each item's kind.
		if items, err := meta.ExtractList(obj); err == nil {
			for _, item := range items {
				if err := p.PrintObj(item, w); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return p.PrintObj(obj, w)
}

// emit writes what is not a Kubernetes object (evictions, cgroups) as
// JSON or YAML, the formats those take.
func emit(w io.Writer, format string, v any) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "    ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return cli.UsageError(fmt.Sprintf("-o %q: want json or yaml", format))
}

// customColumns is kubectl's -o custom-columns=HEADER:JSONPATH,...
type customColumns struct {
	headers []string
	paths   []*jsonpath.JSONPath
}

func newCustomColumns(spec string) (*customColumns, error) {
	c := &customColumns{}
	for _, col := range strings.Split(spec, ",") {
		header, path, ok := strings.Cut(col, ":")
		if !ok || header == "" || path == "" {
			return nil, fmt.Errorf("unexpected custom-columns spec: %s, expected <header>:<json-path-expr>", col)
		}
		path = strings.TrimSpace(path)
		if !strings.HasPrefix(path, "{") {
			path = "{" + strings.TrimPrefix(path, "{") + "}"
		}
		if !strings.HasPrefix(path, "{.") && !strings.HasPrefix(path, "{[") {
			path = "{." + strings.TrimPrefix(path, "{")
		}
		jp := jsonpath.New(header).AllowMissingKeys(true)
		if err := jp.Parse(path); err != nil {
			return nil, fmt.Errorf("column %s: %v", header, err)
		}
		c.headers = append(c.headers, header)
		c.paths = append(c.paths, jp)
	}
	return c, nil
}

// PrintObj prints one row per item of a list, or one for an object.
func (c *customColumns) PrintObj(obj runtime.Object, w io.Writer) error {
	items := []runtime.Object{obj}
	if meta.IsListType(obj) {
		var err error
		if items, err = meta.ExtractList(obj); err != nil {
			return err
		}
	}
	tw := tabwriter.NewWriter(w, 5, 8, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(c.headers, "\t"))
	for _, item := range items {
		// The columns read the item as JSON does: converted once per row.
		var v any
		data, err := json.Marshal(item)
		if err == nil {
			err = json.Unmarshal(data, &v)
		}
		if err != nil {
			return err
		}
		var cells []string
		for _, jp := range c.paths {
			cells = append(cells, jsonpathCell(jp, v))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// jsonpathCell is one column's value in a JSON-decoded object: its results
// joined by commas, or <none>.
func jsonpathCell(jp *jsonpath.JSONPath, v any) string {
	results, err := jp.FindResults(v)
	if err != nil || len(results) == 0 || len(results[0]) == 0 {
		return "<none>"
	}
	var parts []string
	for _, r := range results[0] {
		if !r.IsValid() || (r.Kind() == reflect.Interface && r.IsNil()) {
			continue
		}
		var b bytes.Buffer
		if err := jp.PrintResults(&b, []reflect.Value{r}); err != nil {
			return "<error>"
		}
		parts = append(parts, b.String())
	}
	if len(parts) == 0 {
		return "<none>"
	}
	return strings.Join(parts, ",")
}
