package route

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestParseSource(t *testing.T) {
	f := func(format Format, spec string, want Source, wantErr string) {
		t.Helper()
		got, err := ParseSource(format, spec)
		if wantErr != "" {
			if err == nil || err.Error() != wantErr {
				t.Errorf("%s %q: error %v, want %q", format, spec, err, wantErr)
			}
			return
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s %q = %+v, %v; want %+v", format, spec, got, err, want)
		}
	}
	f(JSON, "a", Source{Kind: Field, Path: []string{"a"}}, "")
	f(JSON, "a.b.0", Source{Kind: Field, Path: []string{"a", "b", "0"}}, "")
	f(JSON, "$topic", Source{Kind: Topic}, "")
	f(JSON, "$partition", Source{Kind: Partition}, "")
	f(JSON, "$offset", Source{Kind: Offset}, "")
	f(JSON, "$timestamp", Source{Kind: Timestamp}, "")
	f(JSON, "$key", Source{Kind: Key}, "")
	f(JSON, "$header.trace.id", Source{Kind: Header, Header: "trace.id"}, "")
	f(Debezium, "$header.x", Source{Kind: Header, Header: "x"}, "")
	f(Debezium, "$version", Source{Kind: Version}, "")
	f(Debezium, "$deleted", Source{Kind: Deleted}, "")
	f(Debezium, "$op", Source{Kind: Op}, "")
	f(Debezium, "$ts_ms", Source{Kind: TsMs}, "")
	f(Debezium, "$source.table", Source{Kind: SourceBlock, Path: []string{"table"}}, "")
	f(Debezium, "$source.a.b", Source{Kind: SourceBlock, Path: []string{"a", "b"}}, "")

	f(JSON, "", Source{}, "empty source")
	f(JSON, "$header.", Source{}, `"$header." needs a header name, e.g. $header.trace_id`)
	f(JSON, "a..b", Source{}, `JSON path "a..b" has an empty element`)
	f(JSON, ".a", Source{}, `JSON path ".a" has an empty element`)
	f(JSON, "$Topic", Source{}, `unknown source "$Topic" (want a JSON path such as a.b.c, or one of $topic, $partition, $offset, $timestamp, $key, $header.NAME)`)
	f(JSON, "$op", Source{}, `unknown source "$op" (want a JSON path such as a.b.c, or one of $topic, $partition, $offset, $timestamp, $key, $header.NAME)`)
	f(JSON, "$source.table", Source{}, `unknown source "$source.table" (want a JSON path such as a.b.c, or one of $topic, $partition, $offset, $timestamp, $key, $header.NAME)`)
	f(Debezium, "$source.", Source{}, `"$source." needs a field of the source block, e.g. $source.table`)
	f(Debezium, "$source.a..b", Source{}, `"$source.a..b" needs a field of the source block, e.g. $source.table`)
	f(ConnectJSON, "a.b", Source{Kind: Field, Path: []string{"a", "b"}}, "")
	f(JSON, "payload.a", Source{Kind: Field, Path: []string{"payload", "a"}}, "")
	f(ConnectJSON, "payload.a", Source{}, `"payload.a": format connect-json reads the fields of the envelope's payload: write the path below it (a, not payload.a)`)
	f(ConnectJSON, "schema", Source{}, `"schema": format connect-json reads the fields of the envelope's payload: write the path below it (a, not payload.a)`)
	f(ConnectJSON, "payloads", Source{Kind: Field, Path: []string{"payloads"}}, "")
	f(Debezium, "$sourc", Source{}, `unknown source "$sourc" (want a path into the row image such as a.b, or one of $topic, $partition, $offset, $timestamp, $key, $version, $deleted, $op, $ts_ms, $header.NAME, $source.PATH)`)
}

func TestDefaultSource(t *testing.T) {
	f := func(format Format, column, want string) {
		t.Helper()
		got, ok := DefaultSource(format, column)
		if got != want || ok != (want != "") {
			t.Errorf("DefaultSource(%s, %q) = %q, %v; want %q", format, column, got, ok, want)
		}
	}
	f(JSON, "_topic", "$topic")
	f(JSON, "_key", "$key")
	f(JSON, "_version", "")
	f(JSON, "id", "")
	f(Debezium, "_offset", "$offset")
	f(Debezium, "_version", "$version")
	f(Debezium, "_deleted", "$deleted")
	f(DebeziumAvro, "_version", "$version")
	f(Avro, "_version", "")
	f(Avro, "_key", "$key")
}

func TestFormats(t *testing.T) {
	if !JSON.Valid() || !ConnectJSON.Valid() || !Debezium.Valid() || !Avro.Valid() || Format("thrift").Valid() || Format("").Valid() {
		t.Error("Valid disagrees with the supported formats")
	}
	for _, f := range []struct {
		f             Format
		registry, cdc bool
	}{{JSON, false, false}, {ConnectJSON, false, false}, {Debezium, false, true}, {Avro, true, false}, {Protobuf, true, false}, {JSONSchema, true, false}, {DebeziumAvro, true, true}} {
		if f.f.Registry() != f.registry || f.f.CDC() != f.cdc {
			t.Errorf("%s: Registry() %v CDC() %v, want %v %v", f.f, f.f.Registry(), f.f.CDC(), f.registry, f.cdc)
		}
	}
	if _, err := ParseSource(DebeziumAvro, "$source.table"); err != nil {
		t.Errorf("debezium-avro $source.table: %v", err)
	}
	if _, err := ParseSource(Avro, "$version"); err == nil {
		t.Error("avro accepts $version")
	}
	if got := FormatNames(); got != "json, connect-json, debezium-json, avro, protobuf, json-schema, debezium-avro" {
		t.Errorf("FormatNames() = %q", got)
	}
	if !DefaultFormat.Valid() {
		t.Error("the default format is not supported")
	}
}

func TestCheckTemplate(t *testing.T) {
	f := func(table, topicRegex, wantProbe string, want ...string) {
		t.Helper()
		var re *regexp.Regexp
		if topicRegex != "" {
			re, _ = regexp.Compile("^(?:" + topicRegex + ")$")
		}
		got, probe := CheckTemplate(table, topicRegex, re)
		if !slices.Equal(got, want) || probe != wantProbe {
			t.Errorf("CheckTemplate(%q, %q) = %q, %q; want %q, %q", table, topicRegex, got, probe, want, wantProbe)
		}
	}
	f("plain", "", "plain")
	f("${topic.last}", `srv\..*`, "x")
	f("raw.${topic}_${1}", `srv\.(\w+)`, "raw.x_x")
	f("${table}", `srv\..*`, "x", `unknown placeholder "${table}" (want ${topic}, ${topic.last}, or ${1}..${9} for topic_regex groups)`)
	f("${0}", `srv\..*`, "x", `unknown placeholder "${0}" (want ${topic}, ${topic.last}, or ${1}..${9} for topic_regex groups)`)
	f("${1}", "", "x", `${1} needs topic_regex with capture groups`)
	f("${2}", `srv\.(\w+)`, "x", `${2}, but topic_regex "srv\\.(\\w+)" has 1 capture groups`)
	f("${2}", `srv\.(`, "x") // an invalid regex is reported by whoever compiles it
	f("${topic.last", `srv\..*`, "${topic.last", `"${topic.last" has an unterminated ${`)
}

func TestExpandTemplate(t *testing.T) {
	f := func(table, topic, topicRegex, want, wantErr string) {
		t.Helper()
		var re *regexp.Regexp
		if topicRegex != "" {
			re = regexp.MustCompile("^(?:" + topicRegex + ")$")
		}
		got, err := ExpandTemplate(table, topic, topicRegex, re)
		if wantErr != "" {
			if err == nil || err.Error() != wantErr {
				t.Errorf("%q for %q: error %v, want %q", table, topic, err, wantErr)
			}
			return
		}
		if err != nil || got != want {
			t.Errorf("%q for %q = %q, %v; want %q", table, topic, got, err, want)
		}
	}
	f("plain", "a.b", "", "plain", "")
	f("${topic}", "srv.public.orders", "", "srv.public.orders", "")
	f("${topic.last}", "srv.public.orders", "", "orders", "")
	f("${topic.last}", "orders", "", "orders", "")
	f("pg_${1}.${2}", "srv.public.orders", `srv\.(\w+)\.(\w+)`, "pg_public.orders", "")
	f("${1}", "other.x", `srv\.(\w+)`, "", `${1} does not match topic "other.x" (topic_regex "srv\\.(\\w+)")`)
	f("${2}", "srv.x", `srv\.(\w+)`, "", `${2} does not match topic "srv.x" (topic_regex "srv\\.(\\w+)")`)
	f("${1}", "srv.x", "", "", `${1} does not match topic "srv.x" (topic_regex "")`)
}

func TestSplitTemplate(t *testing.T) {
	for _, c := range []struct{ table, db, name string }{
		{"plain", "", "plain"},
		{"db.plain", "db", "plain"},
		{"${topic}", "", "${topic}"},
		{"${topic.last}", "", "${topic.last}"},
		{"raw.${topic.last}", "raw", "${topic.last}"},
		{"${topic.last}_cdc", "", "${topic.last}_cdc"},
		{"${1}.${2}", "${1}", "${2}"},
		{"pg_${1}.${topic.last}", "pg_${1}", "${topic.last}"},
		{"a.b.c", "a", "b.c"}, // more dots: config refuses the table part
		{"${topic.last", "${topic", "last"},
	} {
		db, name, hasDB := SplitTemplate(c.table)
		if db != c.db || name != c.name || hasDB != (c.db != "") {
			t.Errorf("SplitTemplate(%q) = %q, %q, %v; want %q, %q", c.table, db, name, hasDB, c.db, c.name)
		}
	}
}

// FuzzParseSource: no source text panics, and what parses is exactly what
// was written: rejoining the parsed source gives the text back.
func FuzzParseSource(f *testing.F) {
	for _, s := range []string{
		"a", "a.b.0", "$topic", "$partition", "$offset", "$timestamp", "$key", "$header.trace.id", "$header.",
		"$version", "$deleted", "$op", "$ts_ms", "$source.table", "$source.", "$source.a..b", "$sourc", "a..b", ".a", "",
		"$Topic", "$", "$$", "$header", "é.ü",
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, spec string, debezium bool) {
		format := JSON
		if debezium {
			format = Debezium
		}
		src, err := ParseSource(format, spec)
		if err != nil {
			se, ok := err.(*SourceError)
			if !ok || se.Spec != spec || se.Problem == 0 || se.Error() == "" {
				t.Fatalf("%q: error %#v", spec, err)
			}
			return
		}
		var back string
		switch src.Kind {
		case Field:
			back = strings.Join(src.Path, ".")
			if strings.HasPrefix(spec, "$") {
				t.Fatalf("%q parsed as a path", spec)
			}
		case Header:
			back = HeaderPrefix + src.Header
		case SourceBlock:
			back = SourcePrefix + strings.Join(src.Path, ".")
			if format != Debezium {
				t.Fatalf("%q: $source in format %s", spec, format)
			}
		default:
			back = spec
			if !slices.Contains(RecordSources(), spec) && !slices.Contains(FormatSources(format), spec) {
				t.Fatalf("%q parsed as %v, which is no fixed-name source of %s", spec, src.Kind, format)
			}
		}
		if back != spec {
			t.Fatalf("%q parsed as %+v, which reads back as %q", spec, src, back)
		}
		for _, p := range src.Path {
			if p == "" {
				t.Fatalf("%q: empty path element in %+v", spec, src)
			}
		}
	})
}

// FuzzTemplate: no table template, topic_regex or topic panics, and a
// template CheckTemplate accepts always expands for a topic that matches
// topic_regex (what validation promises the pipeline).
func FuzzTemplate(f *testing.F) {
	for _, c := range [][3]string{
		{"${topic.last}", `srv\..*`, "srv.public.orders"},
		{"raw.${topic.last}_cdc", `srv\..*`, "srv.public.orders"},
		{"${1}.${2}", `srv\.(\w+)\.(\w+)`, "srv.public.orders"},
		{"pg_${01}", `srv\.(\w+)`, "srv.x"},
		{"${table}", `.*`, "a"},
		{"${topic.last", `.*`, "a"},
		{"${}", "", "a"},
		{"${1}", `(a)?b`, "b"},
		{"$${topic}}", `.*`, "x.y"},
		{"plain", "", "t"},
	} {
		f.Add(c[0], c[1], c[2])
	}
	f.Fuzz(func(t *testing.T, table, topicRegex, topic string) {
		var re *regexp.Regexp
		if topicRegex != "" {
			var err error
			if re, err = regexp.Compile("^(?:" + topicRegex + ")$"); err != nil {
				re = nil
			}
		}
		problems, probe := CheckTemplate(table, topicRegex, re)
		if strings.Contains(probe, "${") && len(problems) == 0 {
			t.Fatalf("%q: probe %q keeps a placeholder without a problem", table, probe)
		}
		if db, rest, hasDB := SplitTemplate(table); (hasDB && db+"."+rest != table) || (!hasDB && (db != "" || rest != table)) {
			t.Fatalf("SplitTemplate(%q) = %q, %q, %v: the parts are not the template", table, db, rest, hasDB)
		}
		name, err := ExpandTemplate(table, topic, topicRegex, re)
		if !IsTemplate(table) && (err != nil || name != table) {
			t.Fatalf("plain %q expanded to %q, %v", table, name, err)
		}
		if len(problems) == 0 && (topicRegex == "" || (re != nil && re.MatchString(topic))) && err != nil {
			t.Fatalf("%q passed CheckTemplate with topic_regex %q, but for topic %q: %v", table, topicRegex, topic, err)
		}
	})
}

func TestCheckMessage(t *testing.T) {
	for _, c := range []struct {
		f    Format
		name string
		ok   bool
	}{
		{Protobuf, "", true},
		{Protobuf, "Event", true},
		{Protobuf, "shop.v1.Order_2", true},
		{Protobuf, "shop.v1.Outer.Inner", true},
		{Protobuf, ".shop.Event", false},
		{Protobuf, "shop..Event", false},
		{Protobuf, "shop.1Event", false},
		{Protobuf, "shop.Ev-ent", false},
		{JSON, "shop.Event", false},
		{Avro, "shop.Event", false},
	} {
		if err := CheckMessage(c.f, c.name); (err == nil) != c.ok {
			t.Errorf("CheckMessage(%s, %q) = %v, want ok %v", c.f, c.name, err, c.ok)
		}
	}
}
