package connectimport

import (
	"fmt"
	"regexp"
	"strings"
)

// Converter classes.
const (
	jsonConverter       = "org.apache.kafka.connect.json.JsonConverter"
	stringConverter     = "org.apache.kafka.connect.storage.StringConverter"
	byteArrayConverter  = "org.apache.kafka.connect.converters.ByteArrayConverter"
	confluentAvro       = "io.confluent.connect.avro.AvroConverter"
	confluentProtobuf   = "io.confluent.connect.protobuf.ProtobufConverter"
	confluentJSONSchema = "io.confluent.connect.json.JsonSchemaConverter"
	apicurioAvro        = "io.apicurio.registry.utils.converter.AvroConverter"
	apicurioProtobuf    = "io.apicurio.registry.utils.converter.ProtobufConverter"
	apicurioJSONSchema  = "io.apicurio.registry.utils.converter.JsonSchemaConverter"
	unwrapSMT           = "io.debezium.transforms.ExtractNewRecordState"
)

// registryFormats maps a registry converter to the sink's format.
var registryFormats = map[string]string{
	confluentAvro: "avro", confluentProtobuf: "protobuf", confluentJSONSchema: "json-schema",
	apicurioAvro: "avro", apicurioProtobuf: "protobuf", apicurioJSONSchema: "json-schema",
}

// usesUnwrap reports whether the transforms chain has Debezium's
// ExtractNewRecordState.
func (v *conv) usesUnwrap() bool {
	for _, n := range splitList(v.get("transforms")) {
		if v.get("transforms."+n+".type") == unwrapSMT {
			return true
		}
	}
	return false
}

// converters picks the routes' format from value.converter, and whether
// they read Debezium change events.
func (v *conv) converters() {
	v.cdc = v.boolKey("debeziumCDCEnabled") || v.usesUnwrap()
	class := v.get("value.converter")
	v.format = "json"
	if v.cdc {
		v.format = "debezium-json"
	}
	switch class {
	case "":
		v.defaultConverter()
	case jsonConverter:
		schemas := !v.has("value.converter.schemas.enable") || v.boolKey("value.converter.schemas.enable")
		switch {
		case v.cdc:
			v.carry("value.converter", "routes[].format: debezium-json", "Debezium change events in JSON, with or without schemas")
		case schemas:
			v.format = "connect-json"
			v.carry("value.converter", "routes[].format: connect-json", "schemas.enable=true (the converter's default): each record is Kafka Connect's {\"schema\", \"payload\"} envelope, read by its schema")
		default:
			v.carry("value.converter", "routes[].format: json", "")
		}
	case stringConverter, byteArrayConverter:
		why := "the values must be JSON text (insertFormat CSV/TSV is not supported)"
		if v.cdc {
			v.carry("value.converter", "routes[].format: debezium-json", why)
		} else {
			v.carry("value.converter", "routes[].format: json", why)
		}
	default:
		v.registryConverter(class)
	}
	v.converterKeys(class)
}

// converterKeys gives the fates of the value converter's keys (of class),
// the subject name strategies (subjectStrategy) and the key converter's.
func (v *conv) converterKeys(class string) {
	for _, k := range sortedKeys(v.cfg) {
		if sub, ok := strings.CutPrefix(k, "value.converter."); ok && !isStrategyKey(k) {
			v.converterKey(class, k, sub)
		}
	}
	v.subjectStrategy()
	for _, k := range sortedKeys(v.cfg) {
		if k == "key.converter" || strings.HasPrefix(k, "key.converter.") {
			v.notNeeded(k, "the official sink does not insert the key, nor does the import ($key reads its bytes; debezium formats read the key with the value's registry)")
		}
	}
}

// registryConverter: a value.converter of class that is not JSON, string
// or bytes: a registry's, whose format the sink reads, or one it cannot.
func (v *conv) registryConverter(class string) {
	f, ok := registryFormats[class]
	if !ok {
		v.unsupported("value.converter", "a converter the sink cannot read: it reads JSON, and Avro, Protobuf and JSON Schema in the Confluent wire format")
		return
	}
	switch {
	case v.cdc && f == "avro":
		f = "debezium-avro"
	case v.cdc:
		v.unsupported("debeziumCDCEnabled", "Debezium change events are read as JSON (debezium-json) or Avro (debezium-avro), not "+f)
		for _, n := range splitList(v.get("transforms")) {
			if v.get("transforms."+n+".type") == unwrapSMT {
				v.unsupported("transforms."+n+".type", "Debezium change events are read as JSON (debezium-json) or Avro (debezium-avro), not "+f)
			}
		}
		v.cdc = false
	}
	v.format = f
	why := "schemas fetched by the id each record carries"
	if strings.HasPrefix(class, "io.apicurio.") {
		why = "the sink reads the Confluent wire format (a zero byte and a 4-byte schema id): the Apicurio converter must write that framing, and the registry is read through its Confluent-compatible API"
	}
	v.carry("value.converter", "routes[].format: "+f, why)
}

// converterKey: value.converter.SUB, key k, of a converter of class.
func (v *conv) converterKey(class, k, sub string) {
	switch sub {
	case "schemas.enable":
		if class == jsonConverter && !v.cdc {
			v.carry(k, "routes[].format: "+v.format, "")
		} else {
			v.notNeeded(k, "read by the format")
		}
	case "schema.registry.url":
		v.doc.set("schema_registry.urls", splitList(v.get(k)))
		v.carry(k, "schema_registry.urls", "")
	case "apicurio.registry.url":
		urls := splitList(v.get(k))
		for i, u := range urls {
			urls[i] = ccompat(u)
		}
		v.doc.set("schema_registry.urls", urls)
		v.carry(k, "schema_registry.urls", "as the registry's Confluent-compatible API, /apis/ccompat/v7")
	case "basic.auth.user.info":
		user, _, _ := strings.Cut(v.get(k), ":")
		v.doc.set("schema_registry.username", user)
		v.carry(k, "schema_registry.username, SINK_SCHEMA_REGISTRY__PASSWORD", "the password is never written to the YAML")
	default:
		v.notNeeded(k, "a converter detail: the sink reads each record's writer schema by its id and converts by column type")
	}
}

// ccompat turns an Apicurio registry URL into its Confluent-compatible API.
func ccompat(u string) string {
	u = strings.TrimRight(u, "/")
	for _, suffix := range []string{"/apis/registry/v2", "/apis/registry/v3", "/apis/registry"} {
		if strings.HasSuffix(u, suffix) {
			return strings.TrimSuffix(u, suffix) + "/apis/ccompat/v7"
		}
	}
	if strings.Contains(u, "/apis/ccompat/") {
		return u
	}
	return u + "/apis/ccompat/v7"
}

// router is a RegexRouter: topics matching re are renamed to repl.
type router struct {
	re   *regexp.Regexp
	expr string
	repl string // in Go's syntax (${1})
}

var javaGroupRef = regexp.MustCompile(`\$(\d)`)

// transforms handles the transforms chain.
func (v *conv) transforms() {
	names := splitList(v.get("transforms"))
	if len(names) > 0 {
		v.notNeeded("transforms", "each transform's fate is on its own keys")
	}
	for _, n := range names {
		t := transform{p: "transforms." + n + ".", key: "transforms." + n + ".type"}
		typ := v.get(t.key)
		if v.has(t.p + "predicate") {
			v.unsupported(t.p+"predicate", "predicates (a transform applied to some records only) are not supported: the transform's fate is as if it applied to every record")
			v.notNeeded(t.p+"negate", "see predicate")
		}
		if typ == "" {
			v.unsupported("transforms", fmt.Sprintf("transform %q has no type", n))
			continue
		}
		apply := wholly(Unsupported, "a transform the sink cannot express ("+typ+"); records reach the table as the topic holds them")
		for _, r := range transformRules {
			if r.match(typ) {
				apply = r.apply
				break
			}
		}
		apply(v, t)
	}
	routers := v.routers
	v.tableFor = func(topic string) (string, bool) {
		for _, r := range routers {
			if r.re.MatchString(topic) {
				return r.re.ReplaceAllString(topic, r.repl), true
			}
		}
		return topic, false
	}
}

// transform is one transform of the chain: the prefix of its keys
// ("transforms.NAME.") and its type key.
type transform struct{ p, key string }

// keys are the transform's keys but its type, in order.
func (v *conv) keysOf(t transform) []string {
	var out []string
	for _, k := range sortedKeys(v.cfg) {
		if strings.HasPrefix(k, t.p) && k != t.key {
			out = append(out, k)
		}
	}
	return out
}

// transformRule maps the transforms whose type match accepts.
type transformRule struct {
	match func(typ string) bool
	apply func(v *conv, t transform)
}

// connectSMT is the package of Kafka's own transforms.
const connectSMT = "org.apache.kafka.connect.transforms."

// transformRules are the transforms the import knows, the first that
// matches a type applies (a $Key variant before its $Value one).
var transformRules = []transformRule{
	{typeIs(unwrapSMT), func(v *conv, t transform) { v.unwrap(t.p) }},
	{typeIs(connectSMT + "RegexRouter"), (*conv).regexRouter},
	{typePrefix(connectSMT + "InsertField$Value"), (*conv).insertField},
	{typePrefix(connectSMT + "TimestampConverter$Value"), (*conv).timestampConverter},
	{typePrefix(connectSMT + "ReplaceField$Value"), (*conv).replaceField},
	{func(typ string) bool { return typ == connectSMT+"ValueToKey" || strings.HasSuffix(typ, "$Key") },
		wholly(NotNeeded, "changes the record key, which the official sink did not insert")},
	{typePrefix(connectSMT + "Cast$Value"),
		wholly(NotNeeded, "the sink converts each value by its column's type (numbers from text and back)")},
	{func(typ string) bool {
		return typ == connectSMT+"DropHeaders" || typ == connectSMT+"InsertHeader" || strings.HasPrefix(typ, connectSMT+"SetSchemaMetadata")
	}, wholly(NotNeeded, "the official sink did not insert headers or schema names")},
	{typePrefix(connectSMT + "Flatten"),
		wholly(Unsupported, "Flatten renames nested fields (a.b becomes a_b): map each such column to its path instead, routes[].columns {a_b: a.b}")},
	{typePrefix(connectSMT + "ExtractField"),
		wholly(Unsupported, "ExtractField makes one field the record: map each column to a path under it instead, routes[].columns {c: field.c}")},
}

func typeIs(want string) func(string) bool { return func(typ string) bool { return typ == want } }

func typePrefix(p string) func(string) bool {
	return func(typ string) bool { return strings.HasPrefix(typ, p) }
}

// wholly gives a transform's type key kind for why, and each of its other
// keys the same kind, pointing at the type key.
func wholly(kind Kind, why string) func(v *conv, t transform) {
	return func(v *conv, t transform) {
		v.set(t.key, kind, "", why)
		for _, k := range v.keysOf(t) {
			v.set(k, kind, "", "see "+t.key)
		}
	}
}

// regexRouter: a RegexRouter renames topics into tables.
func (v *conv) regexRouter(t transform) {
	re, err := regexp.Compile("^(?:" + v.get(t.p+"regex") + ")$")
	if err != nil {
		wholly(Unsupported, fmt.Sprintf("regex %q does not compile here: %v", v.get(t.p+"regex"), err))(v, t)
		return
	}
	repl := javaGroupRef.ReplaceAllString(v.get(t.p+"replacement"), "$${$1}")
	v.routers = append(v.routers, router{re: re, expr: v.get(t.p + "regex"), repl: repl})
	v.carry(t.key, "routes[].table", "the renamed topic names the table, as in the official sink")
	v.carry(t.p+"regex", "routes[].table / topic_regex", "")
	v.carry(t.p+"replacement", "routes[].table", "")
}

// insertField: InsertField$Value's Kafka coordinates become columns.
func (v *conv) insertField(t transform) {
	v.carry(t.key, "routes[].columns", "")
	sources := map[string]string{"topic.field": "$topic", "partition.field": "$partition", "offset.field": "$offset", "timestamp.field": "$timestamp"}
	for _, k := range v.keysOf(t) {
		sub := strings.TrimPrefix(k, t.p)
		if src, ok := sources[sub]; ok {
			col := strings.TrimRight(v.get(k), "!?")
			v.columns[col] = src
			v.carry(k, "routes[].columns."+col+": "+src, "")
			continue
		}
		switch sub {
		case "static.field", "static.value":
			v.unsupported(k, "the sink has no constant column source: give the column DEFAULT in ClickHouse (ALTER TABLE … MODIFY COLUMN c DEFAULT 'value'), which a record without the field gets")
		default:
			v.unsupported(k, "not an InsertField key this import knows")
		}
	}
}

// timestampConverter: the sink converts times by column type, but not by
// a custom pattern.
func (v *conv) timestampConverter(t transform) {
	target := v.get(t.p + "target.type")
	if v.has(t.p+"format") || strings.EqualFold(target, "string") {
		wholly(Unsupported, "the sink converts unix numbers (the unit read from the magnitude), RFC 3339 and ClickHouse's text form by column type, but not a custom format pattern")(v, t)
	} else {
		wholly(NotNeeded, "the sink converts unix numbers (the unit read from the magnitude) and RFC 3339 text into Date and DateTime columns itself")(v, t)
	}
}

// replaceField: ReplaceField$Value's renames become column sources.
func (v *conv) replaceField(t transform) {
	v.notNeeded(t.key, "fields no column takes are not read")
	for _, k := range v.keysOf(t) {
		if strings.TrimPrefix(k, t.p) != "renames" {
			v.notNeeded(k, "fields no column takes are not read")
			continue
		}
		var to []string
		for _, pair := range splitList(v.get(k)) {
			from, col, ok := strings.Cut(pair, ":")
			if !ok {
				continue
			}
			v.columns[strings.TrimSpace(col)] = strings.TrimSpace(from)
			to = append(to, strings.TrimSpace(col)+": "+strings.TrimSpace(from))
		}
		v.carry(k, "routes[].columns {"+strings.Join(to, ", ")+"}", "")
	}
}

// unwrap handles ExtractNewRecordState: the sink reads the change event
// itself, so the transform's work moves into the route.
func (v *conv) unwrap(p string) {
	v.carry(p+"type", "routes[].format: debezium-json (or debezium-avro)",
		"the sink reads Debezium's envelope itself: the after image as the row, a delete as a row marked in the deleted column, for a ReplacingMergeTree(version, deleted) table")
	prefix := "__"
	if v.has(p + "add.fields.prefix") {
		prefix = v.get(p + "add.fields.prefix")
		v.carry(p+"add.fields.prefix", "routes[].columns", "names the added columns")
	}
	mode := strings.ToLower(v.get(p + "delete.handling.mode"))
	tomb := strings.ToLower(v.get(p + "delete.tombstone.handling.mode"))
	v.deleted = "_deleted"
	rewrite := mode == "rewrite" || strings.HasPrefix(tomb, "rewrite")
	if rewrite {
		v.deleted = prefix + "deleted"
	}
	deleteWhy := "deletes were dropped by the transform (its default); the sink writes each as a row with deleted_column " + v.deleted + " = 1, which ReplacingMergeTree(_version, " + v.deleted + ") hides under FINAL: the table needs " + v.deleted + " UInt8 and _version UInt64 (docs/migrating.md)"
	if rewrite {
		deleteWhy = "rewrite: the sink writes a delete as a row with deleted_column " + v.deleted + " = 1 (0 otherwise), a number where the transform wrote \"true\"/\"false\": the column must be UInt8 or Bool"
	}
	for _, k := range []string{"delete.handling.mode", "delete.tombstone.handling.mode"} {
		if v.has(p + k) {
			v.carry(p+k, "routes[].deleted_column", deleteWhy)
		}
	}
	if !v.has(p+"delete.handling.mode") && !v.has(p+"delete.tombstone.handling.mode") {
		v.notes = append(v.notes, "ExtractNewRecordState dropped deletes (its default delete handling); "+deleteWhy)
	}
	if v.has(p + "add.fields") {
		var to []string
		for _, f := range splitList(v.get(p + "add.fields")) {
			col := prefix + strings.ReplaceAll(f, ".", "_")
			src := "$source." + strings.TrimPrefix(f, "source.")
			switch f {
			case "op":
				src = "$op"
			case "ts_ms":
				src = "$ts_ms"
			}
			v.columns[col] = src
			to = append(to, col+": "+src)
		}
		v.carry(p+"add.fields", "routes[].columns {"+strings.Join(to, ", ")+"}", "")
	}
	v.notNeeded(p+"drop.tombstones", "the Debezium formats always skip tombstones")
	v.notNeeded(p+"add.headers", "headers the official sink did not insert")
	v.notNeeded(p+"add.headers.prefix", "headers the official sink did not insert")
	for _, k := range sortedKeys(v.cfg) {
		if strings.HasPrefix(k, p) {
			v.unsupported(k, "an ExtractNewRecordState key this import does not map")
		}
	}
}

// routing makes the routes: topics and topics.regex, renamed by
// RegexRouter, mapped by topic2TableMap.
func (v *conv) routing() {
	tn := &tableNamer{tableFor: v.tableFor, mapping: v.topicTableMap(), split: v.topicSplit()}
	if v.has("topics") {
		topics := splitList(v.get("topics"))
		v.doc.set("kafka.topics", topics)
		v.carry("topics", "kafka.topics, routes[].topic", "")
		for _, t := range topics {
			v.addRoute("topic", t, tn.table(t))
		}
	}
	if v.has("topics.regex") {
		v.regexRoutes(tn.mapping, tn.split)
	}
	if len(tn.dotted) > 0 {
		v.fates["topics"] = Fate{Kind: Unsupported, Why: "the official sink writes into a table named like the topic, dots included (" + strings.Join(tn.dotted, ", ") + "); the sink reads a dot as database.table, so the routes name the table with _ for each dot: rename the table, or map the topic in topic2TableMap"}
	}
	if v.has("auto.evolve") {
		switch {
		case !v.boolKey("auto.evolve"):
			v.notNeeded("auto.evolve", "false: columns are not added (the sink's default)")
		case v.format == "json" || v.format == "connect-json":
			v.carry("auto.evolve", "routes[].schema.evolve: add_columns", "each new top-level field becomes a column, its type inferred")
		default:
			v.unsupported("auto.evolve", "the sink adds columns for format json only, not "+v.format)
		}
	}
	if v.boolKey("debeziumCDCEnabled") {
		v.carry("debeziumCDCEnabled", "routes[].format: "+v.format+", version_column: _version, deleted_column: is_deleted",
			"the columns the official sink writes; its _version is the LSN for PostgreSQL (as the sink's), for other databases a number on another scale than the sink's (ts_ms × 10^6 + offset); a __ts_ms column needs routes[].columns {__ts_ms: $source.ts_ms}")
	} else if v.has("debeziumCDCEnabled") {
		v.notNeeded("debeziumCDCEnabled", "false")
	}
}

// topicTableMap reads topic2TableMap ("topic=table, ...").
func (v *conv) topicTableMap() map[string]string {
	mapping := map[string]string{}
	if !v.has("topic2TableMap") {
		return mapping
	}
	for _, kv := range strings.Split(v.get("topic2TableMap"), ",") {
		k, t, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if ok && strings.TrimSpace(k) != "" && strings.TrimSpace(t) != "" {
			mapping[strings.TrimSpace(k)] = strings.TrimSpace(t)
		}
	}
	v.carry("topic2TableMap", "routes[].table", "")
	return mapping
}

// topicSplit is the character that splits a topic into database and
// table under enableDbTopicSplit, "" when it is off.
func (v *conv) topicSplit() string {
	if !v.boolKey("enableDbTopicSplit") {
		v.notNeeded("enableDbTopicSplit", "false")
		v.notNeeded("dbTopicSplitChar", "enableDbTopicSplit is false")
		return ""
	}
	v.carry("enableDbTopicSplit", "routes[].table: database.table", "the topic names the database and the table, as in the official sink")
	v.carry("dbTopicSplitChar", "routes[].table", "")
	return v.get("dbTopicSplitChar")
}

// tableNamer names a listed topic's table as the official sink does:
// renamed by RegexRouter (tableFor), mapped by topic2TableMap, split into
// database and table; a dot left in a name becomes _ (dotted lists them).
type tableNamer struct {
	tableFor func(topic string) (string, bool)
	mapping  map[string]string
	split    string
	dotted   []string
}

func (tn *tableNamer) table(topic string) string {
	name, _ := tn.tableFor(topic)
	if t, ok := tn.mapping[name]; ok {
		name = t
	}
	if tn.split != "" {
		if db, t, ok := strings.Cut(name, tn.split); ok {
			return db + "." + t
		}
	}
	if strings.Contains(name, ".") {
		tn.dotted = append(tn.dotted, name)
		return strings.ReplaceAll(name, ".", "_")
	}
	return name
}

// regexRoutes makes the routes of topics.regex: one per RegexRouter, one
// per topic2TableMap entry without routers, and the catch-all named by
// the topic.
func (v *conv) regexRoutes(mapping map[string]string, split string) {
	re := v.get("topics.regex")
	v.doc.set("kafka.topic_regex", re)
	v.carry("topics.regex", "kafka.topic_regex, routes[].topic_regex", "")
	for _, r := range v.routers {
		if len(mapping) > 0 || split != "" {
			v.unsupported("topic2TableMap", "with topics.regex and RegexRouter together the import cannot tell which renamed topic each table takes: write routes per topic")
		}
		v.addRoute("topic_regex", r.expr, r.repl)
	}
	for _, k := range sortedKeys(mapping) {
		if len(v.routers) == 0 {
			v.addRoute("topic", k, mapping[k])
		}
	}
	if split != "" && len(v.routers) == 0 {
		v.unsupported("enableDbTopicSplit", "with topics.regex the import cannot split topic names it does not know: write routes with topic_regex capture groups, table: \"${1}.${2}\" and the databases it may write to in databases:")
	}
	v.addRoute("topic_regex", re, "${topic}")
	v.notes = append(v.notes, "topics.regex: each topic's table is the topic's name (${topic}), as in the official sink; a record of a topic whose name has a dot (a topic never chooses the database), or whose table is missing, is a bad record")
}

// addRoute appends one route.
func (v *conv) addRoute(kind, topic, table string) {
	r := &omap{}
	r.set(kind, topic)
	r.set("table", table)
	r.set("format", v.format)
	if v.cdc {
		r.set("version_column", "_version")
		deleted := v.deleted
		if v.boolKey("debeziumCDCEnabled") {
			deleted = "is_deleted"
		}
		if deleted == "" {
			deleted = "_deleted"
		}
		r.set("deleted_column", deleted)
	}
	if len(v.columns) > 0 {
		cols := map[string]string{}
		for k, s := range v.columns {
			cols[k] = s
		}
		r.set("columns", cols)
	}
	if (v.format == "json" || v.format == "connect-json") && v.boolKey("auto.evolve") {
		r.set("schema.evolve", "add_columns")
	}
	v.routes = append(v.routes, r)
}
