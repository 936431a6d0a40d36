package connectimport

import (
	"slices"
	"strings"

	"sink/config"
)

// The schema registry's subject name strategy: which subject a producer's
// serializer registers a schema under. Confluent's serializers name it
// value.subject.name.strategy and key.subject.name.strategy, Apicurio's
// apicurio.registry.artifact-resolver-strategy; a connector config holds
// them under its converters' prefixes (value.converter., key.converter.)
// or, copied from a producer's settings, bare. The sink's counterpart is
// schema_registry.subject_strategy, one setting for keys and values: which
// subjects a schema named by a topic's records must be registered under
// (docs/operations.md, "Which schemas a topic's records may name").
// Connect's converters do not check this when they read; the sink does,
// and a record naming a schema of another subject is a bad record.

// strategyKeys are the keys of a subject name strategy, bare: the
// converter prefixes go before them.
var strategyKeys = []string{"value.subject.name.strategy", "key.subject.name.strategy", "apicurio.registry.artifact-resolver-strategy"}

// subjectStrategies maps a strategy class, by its simple name (Confluent's
// io.confluent.kafka.serializers.subject.*, Apicurio's
// io.apicurio.registry.serde.strategy.*), to schema_registry.subject_strategy.
var subjectStrategies = map[string]string{
	"TopicNameStrategy":       config.SubjectTopicName,       // TOPIC-value, TOPIC-key
	"TopicIdStrategy":         config.SubjectTopicName,       // Apicurio's: the same subjects
	"TopicRecordNameStrategy": config.SubjectTopicRecordName, // TOPIC-<record name>
	"TopicRecordIdStrategy":   config.SubjectTopicRecordName, // Apicurio's: the same subjects
	// A record type's own name (any topic may carry it), or the bare
	// topic (SimpleTopicIdStrategy: neither TOPIC-value nor TOPIC-…):
	// no subject the sink can check.
	"RecordNameStrategy":        config.SubjectAny,
	"RecordIdStrategy":          config.SubjectAny,
	"QualifiedRecordIdStrategy": config.SubjectAny,
	"SimpleTopicIdStrategy":     config.SubjectAny,
}

// strategyWhy says what each subject_strategy lets a record name.
var strategyWhy = map[string]string{
	config.SubjectTopicName:       "a record may name only a schema registered under TOPIC-value (TOPIC-key for keys); Connect's converter did not check; to the sink such a record is a bad record",
	config.SubjectTopicRecordName: "a record may name only a schema registered under a subject TOPIC-<record name>; Connect's converter did not check; to the sink such a record is a bad record",
	config.SubjectAny:             "subjects do not name the topic: a record may name any schema id, as with Connect's converter",
}

// strategyOrder ranks the settings by how many schemas a record may name:
// of several keys, the sink takes the one that refuses the fewest.
var strategyOrder = map[string]int{config.SubjectTopicName: 0, config.SubjectTopicRecordName: 1, config.SubjectAny: 2}

// subjectStrategy maps every subject name strategy key of the connector
// onto schema_registry.subject_strategy (nothing is written when none is
// set: the sink's default, any, is what Connect's converters check).
func (v *conv) subjectStrategy() {
	var keys []string
	for _, k := range sortedKeys(v.cfg) {
		if isStrategyKey(k) && v.has(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	if !registryFormatNames[v.format] {
		for _, k := range keys {
			v.notNeeded(k, "format "+v.format+" reads no schema registry")
		}
		return
	}
	own := map[string]string{} // each key's own setting
	var settings []string      // the settings given, each once
	for _, k := range keys {
		s, known := strategyOf(v.get(k))
		if !known {
			v.unsupported(k, "a subject name strategy the sink does not know: schema_registry.subject_strategy checks TopicNameStrategy (topic_name) or TopicRecordNameStrategy (topic_record_name), or nothing (any)")
		}
		own[k] = s
		if !slices.Contains(settings, s) {
			settings = append(settings, s)
		}
	}
	// The one that refuses the fewest records: a key's schemas must all
	// pass, whichever strategy registered them.
	chosen := slices.MaxFunc(settings, func(a, b string) int { return strategyOrder[a] - strategyOrder[b] })
	v.doc.set("schema_registry.subject_strategy", chosen)
	for _, k := range keys {
		why := strategyWhy[chosen]
		if own[k] != chosen {
			why = "alone it gives " + own[k] + "; the sink has one setting for keys and values, and another key's strategy admits more schemas: see the note"
		}
		v.carry(k, "schema_registry.subject_strategy: "+chosen, why)
	}
	if len(settings) > 1 {
		v.notes = append(v.notes, "schema_registry.subject_strategy: the connector's subject name strategies differ ("+strings.Join(keys, ", ")+"); the sink has one setting for keys and values and takes the one that refuses the fewest records, "+chosen)
	}
}

// strategyOf is the subject_strategy of a strategy class (any, and known
// false, for a class the sink does not know).
func strategyOf(class string) (setting string, known bool) {
	s, ok := subjectStrategies[class[strings.LastIndexByte(class, '.')+1:]]
	if !ok {
		return config.SubjectAny, false
	}
	return s, true
}

// isStrategyKey reports whether k is a subject name strategy key, bare or
// under a converter's prefix.
func isStrategyKey(k string) bool {
	for _, prefix := range []string{"", "value.converter.", "key.converter."} {
		if rest, ok := strings.CutPrefix(k, prefix); ok && slices.Contains(strategyKeys, rest) {
			return true
		}
	}
	return false
}

// registryFormatNames are the formats read through a schema registry.
var registryFormatNames = map[string]bool{"avro": true, "protobuf": true, "json-schema": true, "debezium-avro": true}
