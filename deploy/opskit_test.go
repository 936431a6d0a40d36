// Package deploy_test checks the operations kit against the sink itself: the
// Grafana dashboard and the Prometheus rules may only name series that the
// real sink binary serves on /metrics after a real run (Kafka and both
// ClickHouse servers, with a bad record and insert retries on the way, so
// the DLQ and retry series exist), the rules pass promtool's check and their
// unit tests, and the dashboard is an importable dashboard with the data
// source as a variable.
package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"sink/internal/testenv"
)

const (
	rulesFile     = "prometheus/sink-rules.yaml"
	rulesTestFile = "prometheus/sink-rules.test.yaml"
	dashboardFile = "grafana/sink-dashboard.json"
)

func TestRulesPromtool(t *testing.T) {
	promtool := testenv.Tool(t, "promtool")
	for _, args := range [][]string{{"check", "rules", filepath.Base(rulesFile)}, {"test", "rules", filepath.Base(rulesTestFile)}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = filepath.Dir(rulesFile)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// dashboard is the part of Grafana's dashboard model the checks read.
type dashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name, Type string
			Query      any            `json:"query"`
			Datasource map[string]any `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int                       `json:"id"`
	Type       string                    `json:"type"`
	Title      string                    `json:"title"`
	Datasource map[string]any            `json:"datasource"`
	GridPos    *struct{ H, W, X, Y int } `json:"gridPos"`
	Targets    []struct {
		Expr       string         `json:"expr"`
		RefID      string         `json:"refId"`
		Datasource map[string]any `json:"datasource"`
	} `json:"targets"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// The dashboard is importable: a title, uid and schema version, a
// datasource variable of type prometheus that every panel and query uses,
// unique panel ids, grid positions inside the 24-column grid, a query in
// every graph panel.
func TestDashboardModel(t *testing.T) {
	d := readDashboard(t)
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 30 {
		t.Errorf("title %q uid %q schemaVersion %d: want all set (schemaVersion of a current Grafana)", d.Title, d.UID, d.SchemaVersion)
	}
	hasDS := false
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus" {
			hasDS = true
		}
		if v.Type == "query" && fmt.Sprint(v.Datasource["uid"]) != "${datasource}" {
			t.Errorf("variable %s: datasource %v, want ${datasource}", v.Name, v.Datasource)
		}
	}
	if !hasDS {
		t.Error("no templating variable `datasource` of type datasource for prometheus")
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos == nil || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W < 1 || p.GridPos.H < 1 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if fmt.Sprint(p.Datasource["uid"]) != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %v, %d targets: want ${datasource} and a query", p.Title, p.Datasource, len(p.Targets))
		}
		for _, q := range p.Targets {
			if q.Expr == "" || q.RefID == "" || fmt.Sprint(q.Datasource["uid"]) != "${datasource}" {
				t.Errorf("panel %q: target %+v: want expr, refId and the ${datasource}", p.Title, q)
			}
		}
	}
}

// kitExpressions returns every PromQL expression of the dashboard (panel
// queries and label_values variable queries) and of the rules, each with
// where it comes from.
func kitExpressions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	d := readDashboard(t)
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			out[q.Expr] = fmt.Sprintf("%s panel %q", dashboardFile, p.Title)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		m := regexp.MustCompile(`^label_values\((.*),\s*\w+\)$`).FindStringSubmatch(fmt.Sprint(q["query"]))
		if m == nil {
			t.Errorf("%s variable %s: query %v is not label_values(selector, label)", dashboardFile, v.Name, q["query"])
			continue
		}
		out[m[1]] = fmt.Sprintf("%s variable %s", dashboardFile, v.Name)
	}
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Record, Expr string }
		}
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out[r.Expr] = fmt.Sprintf("%s alert %s", rulesFile, r.Alert+r.Record)
		}
	}
	if len(out) < 10 {
		t.Fatalf("only %d expressions in the kit", len(out))
	}
	return out
}

var (
	// Parts of a PromQL expression that hold no metric name: strings, label
	// matchers, ranges and offsets, and the label lists of by/without/on/
	// ignoring/group_left/group_right.
	promStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promLabels   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`\$?[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true}
)

// metricNames returns the metric names expr selects: identifiers that are
// not functions or aggregations (followed by a parenthesis), keywords,
// Grafana variables ($...), numbers, or inside strings, matchers and
// label lists.
func metricNames(expr string) []string {
	s := promStrings.ReplaceAllString(expr, `""`)
	s = promMatchers.ReplaceAllString(s, " ")
	s = promLabels.ReplaceAllString(s, " ")
	var names []string
	for _, m := range promIdent.FindAllStringSubmatchIndex(s, -1) {
		id := s[m[0]:m[1]]
		if m[2] >= 0 || strings.HasPrefix(id, "$") || promKeywords[strings.ToLower(id)] {
			continue // a call, a variable, a keyword
		}
		if m[0] > 0 && (s[m[0]-1] >= '0' && s[m[0]-1] <= '9' || s[m[0]-1] == '.') {
			continue // the exponent or unit of a number (1e15, 5m)
		}
		if !slices.Contains(names, id) {
			names = append(names, id)
		}
	}
	return names
}

func TestMetricNames(t *testing.T) {
	f := func(expr string, want ...string) {
		t.Helper()
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %q, want %q", expr, got, want)
		}
	}
	f(`sink_inserts_total`, "sink_inserts_total")
	f(`sum by (table) (rate(sink_inserts_total{job=~"$job", table=~"$table"}[$__rate_interval])) * 60`, "sink_inserts_total")
	f(`histogram_quantile(0.99, sum by (le, table) (rate(sink_insert_duration_seconds_bucket[5m])))`, "sink_insert_duration_seconds_bucket")
	f(`a > on (job, instance) group_left () (10 * b) and on (job) (c > 0 or on (job) sum by (job) (d) > 0)`, "a", "b", "c", "d")
	f(`process_resident_memory_bytes / on (job, instance) (go_gc_gomemlimit_bytes < 1e15) > 0.95`, "process_resident_memory_bytes", "go_gc_gomemlimit_bytes")
	f(`min_over_time(x[15m]) == 1 unless y offset 1h`, "x", "y")
	f(`max(sink_batch_max_wait_seconds{job=~"$job", table="a{b}"})`, "sink_batch_max_wait_seconds")
	f(`sum without (partition) (lag{topic='x'})`, "lag")
}
