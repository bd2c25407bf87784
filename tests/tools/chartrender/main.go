// Renders a Helm chart's templates the way `helm template` does, for a machine without helm: text/template
// with sprig and Helm's own include, required, tpl, toYaml and fromYaml; values.yaml merged with -f files.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"github.com/ghodss/yaml"
)

func load(path string) map[string]interface{} {
	data, err := os.ReadFile(path)
	if err != nil {
		fail(err)
	}
	out := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &out); err != nil {
		fail(fmt.Errorf("%s: %w", path, err))
	}
	return out
}

func merge(dst, src map[string]interface{}) map[string]interface{} {
	for k, v := range src {
		if sm, ok := v.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				dst[k] = merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

// Helm's .Capabilities.APIVersions: "group/version" and "group/version/Kind" of the API server.
type apiVersions []string

func (a apiVersions) Has(v string) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

// What a Kubernetes 1.30 API server's discovery lists of the kinds the chart asks about; CHARTRENDER_API_VERSIONS
// (comma-separated, as helm template --api-versions) replaces it, "" for an API server without them.
const defaultAPIVersions = "v1,apps/v1,policy/v1,rbac.authorization.k8s.io/v1,admissionregistration.k8s.io/v1," +
	"admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration," +
	"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy," +
	"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding"

func fail(err error) {
	fmt.Fprintln(os.Stderr, "chartrender:", err)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 4 {
		fail(fmt.Errorf("usage: chartrender CHART RELEASE NAMESPACE [VALUES...]"))
	}
	chart, release, namespace := os.Args[1], os.Args[2], os.Args[3]
	values := load(filepath.Join(chart, "values.yaml"))
	for _, f := range os.Args[4:] {
		values = merge(values, load(f))
	}
	meta := load(filepath.Join(chart, "Chart.yaml"))
	list, set := os.LookupEnv("CHARTRENDER_API_VERSIONS")
	if !set {
		list = defaultAPIVersions
	}
	var versions apiVersions
	for _, v := range strings.Split(list, ",") {
		if v = strings.TrimSpace(v); v != "" {
			versions = append(versions, v)
		}
	}
	top := map[string]interface{}{
		"Capabilities": map[string]interface{}{"APIVersions": versions},
		"Values":       values,
		"Release":      map[string]interface{}{"Name": release, "Namespace": namespace, "Service": "Helm"},
		"Chart": map[string]interface{}{"Name": meta["name"], "Version": meta["version"],
			"AppVersion": meta["appVersion"]},
	}

	root := template.New("chart").Option("missingkey=zero")
	funcs := sprig.TxtFuncMap()
	funcs["toYaml"] = func(v interface{}) string {
		data, err := yaml.Marshal(v)
		if err != nil {
			return ""
		}
		return strings.TrimSuffix(string(data), "\n")
	}
	// Helm's fromYaml: a map, or {"Error": why} for what is not a YAML mapping.
	funcs["fromYaml"] = func(text string) map[string]interface{} {
		out := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(text), &out); err != nil {
			out["Error"] = err.Error()
		}
		return out
	}
	funcs["include"] = func(name string, data interface{}) (string, error) {
		var buf bytes.Buffer
		err := root.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
	// Helm's lookup answers nothing in `helm template`, as it does here.
	funcs["lookup"] = func(apiVersion, kind, namespace, name string) map[string]interface{} {
		return map[string]interface{}{}
	}
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil || v == "" {
			return nil, fmt.Errorf("%s", msg)
		}
		return v, nil
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		err = t.Execute(&buf, data)
		return buf.String(), err
	}
	root.Funcs(funcs)

	files, _ := filepath.Glob(filepath.Join(chart, "templates", "*"))
	sort.Strings(files)
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			fail(err)
		}
		name := filepath.Base(f)
		if _, err := root.New(name).Parse(string(data)); err != nil {
			fail(err)
		}
		if strings.HasSuffix(name, ".yaml") && !strings.HasPrefix(name, "_") {
			names = append(names, name)
		}
	}
	for _, name := range names {
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, top); err != nil {
			fail(err)
		}
		out := strings.ReplaceAll(buf.String(), "<no value>", "")
		if strings.TrimSpace(out) == "" {
			continue
		}
		fmt.Printf("---\n# Source: %s\n%s\n", name, strings.TrimLeft(out, "\n"))
	}
}
