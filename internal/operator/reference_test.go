/*
Copyright 2026 The cluster-api-provider-mailgun Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package operator_test

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/metrics"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
)

// The reference in docs/operations.md claims to list every flag, metric,
// metric label and condition reason; these tests keep it from drifting
// from the code, and keep the CSV's description from naming what the code
// lacks.

func operationsDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestOperationsDocListsEveryFlag(t *testing.T) {
	doc := operationsDoc(t)
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o := operator.DefaultOptions()
	o.BindFlags(fs)
	names := []string{"kubeconfig"} // controller-runtime's, on main's flag set
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	for _, name := range names {
		if !strings.Contains(doc, "`--"+name+"`") {
			t.Errorf("docs/operations.md does not document flag --%s", name)
		}
	}
}

// metricDescs are the names and variable labels of the provider's metrics.
func metricDescs(t *testing.T) map[string][]string {
	t.Helper()
	ch := make(chan *prometheus.Desc, 16)
	go func() {
		defer close(ch)
		m := metrics.New()
		for _, c := range []prometheus.Collector{m.EmailsSent, m.EmailsFailed, m.SendDuration, m.Lookups, m.Deliveries} {
			c.Describe(ch)
		}
	}()
	descRE := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	out := map[string][]string{}
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		out[m[1]] = strings.Split(m[2], ",")
	}
	return out
}

func TestOperationsDocListsEveryMetricAndLabel(t *testing.T) {
	doc := operationsDoc(t)
	descs := metricDescs(t)
	if len(descs) == 0 {
		t.Fatal("no metrics found")
	}
	for name, labels := range descs {
		row := docRow(doc, "`"+name+"`")
		if row == "" {
			t.Errorf("docs/operations.md has no row for metric %s", name)
			continue
		}
		for _, l := range labels {
			if l != "" && !strings.Contains(row, "`"+l+"`") {
				t.Errorf("docs/operations.md's row for %s does not name label %s", name, l)
			}
		}
	}
	// The failure classes are the values of the class label.
	row := docRow(doc, "`capmg_email_send_failures_total`")
	for _, class := range stringConsts(t, "../mailer/mailer.go", "Class") {
		if !strings.Contains(row, class) {
			t.Errorf("docs/operations.md's row for capmg_email_send_failures_total does not list class %s", class)
		}
	}
}

func TestOperationsDocExplainsEveryConditionReason(t *testing.T) {
	doc := operationsDoc(t)
	reasons := stringConsts(t, "../../api/v1beta1/conditions.go", "Reason")
	if len(reasons) < 10 {
		t.Fatalf("found only %d reasons: %v", len(reasons), reasons)
	}
	for _, r := range reasons {
		if !strings.Contains(doc, "| `"+r+"` |") {
			t.Errorf("docs/operations.md has no table row explaining reason %s", r)
		}
	}
}

// TestCSVDescriptionNamesOnlyWhatExists: the conditions and metrics the
// CSV's description (what OperatorHub shows) names exist in the code.
func TestCSVDescriptionNamesOnlyWhatExists(t *testing.T) {
	b, err := os.ReadFile("../../config/manifests/bases/cluster-api-provider-mailgun.clusterserviceversion.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var csv struct {
		Spec struct {
			Description string `json:"description"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &csv); err != nil {
		t.Fatal(err)
	}
	desc := strings.Join(strings.Fields(csv.Spec.Description), " ")
	descs := metricDescs(t)
	for _, m := range regexp.MustCompile(`capmg_[a-z_]+`).FindAllString(desc, -1) {
		if _, ok := descs[m]; !ok {
			t.Errorf("the CSV description names metric %s, which the operator does not have", m)
		}
	}
	conditions := map[string]bool{}
	for _, c := range stringConsts(t, "../../api/v1beta1/conditions.go", "Condition") {
		conditions[c] = true
	}
	m := regexp.MustCompile("in the ((?:`[A-Za-z]+`(?:, | and )?)+) conditions").FindStringSubmatch(desc)
	if m == nil {
		t.Fatal("the CSV description does not list the conditions (in the `A`, `B` and `C` conditions)")
	}
	named := regexp.MustCompile("`([A-Za-z]+)`").FindAllStringSubmatch(m[1], -1)
	for _, n := range named {
		if !conditions[n[1]] {
			t.Errorf("the CSV description names condition %s, which the API does not define", n[1])
		}
	}
	if len(named) != len(conditions) {
		t.Errorf("the CSV description names %d conditions, the API defines %d: %v", len(named), len(conditions), conditions)
	}
}

// docRow is the line of doc's tables that starts with cell.
func docRow(doc, cell string) string {
	for line := range strings.Lines(doc) {
		if strings.HasPrefix(line, "| "+cell+" |") {
			return line
		}
	}
	return ""
}

// stringConsts returns the values of the string constants of file whose
// names end in suffix.
func stringConsts(t *testing.T, file, suffix string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if !strings.HasSuffix(name.Name, suffix) || i >= len(vs.Values) {
				continue
			}
			if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, v)
			}
		}
		return true
	})
	return out
}
