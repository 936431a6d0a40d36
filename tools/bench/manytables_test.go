package main

import (
	"strings"
	"testing"
)

func TestParseOverrides(t *testing.T) {
	f := func(in string, want map[string]map[string]string, wantErr string) {
		t.Helper()
		got, err := parseOverrides(in)
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("%q: error %v, want one with %q", in, err, wantErr)
			}
			return
		}
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%q = %v, want %v", in, got, want)
		}
		for sec, kv := range want {
			for k, v := range kv {
				if got[sec][k] != v {
					t.Fatalf("%q = %v, want %v", in, got, want)
				}
			}
		}
	}
	f("", map[string]map[string]string{}, "")
	f("clickhouse.max_inserts_per_minute=60", map[string]map[string]string{"clickhouse": {"max_inserts_per_minute": "60"}}, "")
	f(" clickhouse.max_inserts_per_minute = 60 , route.max_latency=2m,batch.mode=adaptive",
		map[string]map[string]string{"clickhouse": {"max_inserts_per_minute": "60"}, "route": {"max_latency": "2m"}, "batch": {"mode": "adaptive"}}, "")
	f("max_inserts_per_minute=60", nil, "not section.key=value")
	f("clickhouse.max_inserts_per_minute", nil, "not section.key=value")
	f("http.listen=x", nil, `section "http"`)
}

// The budget variant's overrides land in the generated config where the
// sink reads them: the clickhouse section and the route.
func TestManyTablesConfig(t *testing.T) {
	ov, err := parseOverrides("clickhouse.max_inserts_per_minute=60,route.max_latency=2m")
	if err != nil {
		t.Fatal(err)
	}
	sc := sinkConf{name: "x", group: "g", topicRegex: "bench_mt100_([0-9]+)", table: "t${1}", database: "db",
		brokers: []string{"k:9092"}, chAddrs: []string{"c:9000"}, clickhouse: ov["clickhouse"], route: "    max_latency: 2m\n"}
	// The sink's own config parser takes it (the budget keys exist).
	if _, err := sc.parse(); err != nil {
		t.Fatal(err)
	}
	y := sc.yaml()
	for _, want := range []string{"  topic_regex: 'bench_mt100_([0-9]+)'\n", "  max_inserts_per_minute: 60\n",
		"  - topic_regex: 'bench_mt100_([0-9]+)'\n    table: 't${1}'\n    format: json\n    max_latency: 2m\n"} {
		if !strings.Contains(y, want) {
			t.Errorf("config lacks %q:\n%s", want, y)
		}
	}
}

func TestMTClasses(t *testing.T) {
	// 20 tables: table i's rows all took (i+1) seconds.
	hists := map[int][]latBucket{}
	for i := range 20 {
		hists[i] = []latBucket{{float64(i+1) * 1000, 10}}
	}
	cs := mtClasses(hists, 20, true, 5500)
	if len(cs) != 2 || cs[0].Name != "busy" || cs[0].Tables != 2 || cs[1].Name != "quiet" || cs[1].Tables != 18 {
		t.Fatalf("classes %+v", cs)
	}
	if b := cs[0]; b.Rows != 20 || b.P50Ms != 1000 || b.P99Ms != 2000 || b.MaxMs != 2000 || b.WorstTableP99 != 2000 || b.OverBound != 0 {
		t.Fatalf("busy %+v", b)
	}
	// quiet: tables 2..19 (3 s … 20 s); over 5.5 s: tables 5..19.
	if q := cs[1]; q.Rows != 180 || q.MaxMs != 20000 || q.WorstTableP99 != 20000 || q.OverBound != 15 {
		t.Fatalf("quiet %+v", q)
	}
	cs = mtClasses(hists, 20, false, 5500)
	if len(cs) != 1 || cs[0].Name != "all" || cs[0].Tables != 20 || cs[0].Rows != 200 || cs[0].OverBound != 15 {
		t.Fatalf("even rates: %+v", cs)
	}
	// A table with no rows is in no quantile and over no bound.
	cs = mtClasses(map[int][]latBucket{}, 3, false, 1)
	if cs[0].Rows != 0 || cs[0].OverBound != 0 {
		t.Fatalf("no rows: %+v", cs)
	}
}

func TestSummarizeMT(t *testing.T) {
	run := func(variant string, ipm float64, status string) MTRun {
		return MTRun{Server: "ClickHouse 26.9", Tables: 100, Shape: "low", Variant: variant, Status: status, Exact: status == "ok",
			InsertsPerMin: ipm, Classes: []MTClass{{Name: "all", P99Ms: 1000}}}
	}
	s := summarizeMT([]MTRun{run("off", 900, "ok"), run("budget", 60, "ok"), run("off", 1000, "ok"), run("budget", 50, "ok"),
		run("off", 0, "failed: x"), run("budget", 58, "not exact: 1 tables' rows differ")})
	if len(s) != 2 || s[0].Variant != "off" || s[1].Variant != "budget" {
		t.Fatalf("summary %+v", s)
	}
	if off := s[0]; off.Runs != 2 || off.Of != 3 || off.Exact != 2 || off.InsertsPerMin.Median != 950 || off.InsertsRatio != 0 {
		t.Fatalf("off %+v", off)
	}
	// A run that is not exact still counts its INSERTs, not as exact.
	if b := s[1]; b.Runs != 3 || b.Exact != 2 || b.InsertsPerMin.Median != 58 || b.InsertsRatio != 58.0/950 {
		t.Fatalf("budget %+v", b)
	}
}
