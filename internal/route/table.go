package route

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A table template is a route's table name with placeholders that the topic
// name fills in, so that one route serves every table of a Debezium server:
//
//	${topic}       the whole topic name
//	${topic.last}  what follows the topic's last dot (server.schema.table gives table)
//	${1}..${9}     the capture groups of the route's topic_regex
//
// The database of such a table is the part of the template before its
// first dot outside a placeholder (SplitTemplate), never a dot that a
// topic's name brings: "${topic}" for topic prod.orders names the table
// "prod.orders" in the connector's database, which is not a valid table
// name (config refuses it), not the table orders of database prod.

// placeholderRE finds the placeholders of a table template.
var placeholderRE = regexp.MustCompile(`\$\{([^}]*)\}`)

// IsTemplate reports whether table has placeholders, i.e. depends on the
// topic.
func IsTemplate(table string) bool { return strings.Contains(table, "${") }

// CheckTemplate returns the problems of table's placeholders that can never
// be filled: unknown names, a ${N} without topic_regex or beyond its capture
// groups, an unterminated "${". topicRegex is the route's topic_regex as
// written ("" for none) and re its compiled form (nil when it does not
// compile, which is reported elsewhere: then no ${N} is refused for its
// group count). probe is table with each placeholder replaced by "x", for
// the usual table-name checks.
func CheckTemplate(table, topicRegex string, re *regexp.Regexp) (problems []string, probe string) {
	if !IsTemplate(table) {
		return nil, table
	}
	groups := -1 // no topic_regex: no ${N}
	if re != nil {
		groups = re.NumSubexp()
	} else if topicRegex != "" {
		groups = 0
	}
	for _, m := range placeholderRE.FindAllStringSubmatch(table, -1) {
		switch name := m[1]; {
		case name == "topic" || name == "topic.last":
		default:
			n, err := strconv.Atoi(name)
			switch {
			case err != nil || n < 1:
				problems = append(problems, fmt.Sprintf("unknown placeholder %q (want ${topic}, ${topic.last}, or ${1}..${9} for topic_regex groups)", m[0]))
			case groups < 0:
				problems = append(problems, fmt.Sprintf("%s needs topic_regex with capture groups", m[0]))
			case n > groups && re != nil:
				problems = append(problems, fmt.Sprintf("%s, but topic_regex %q has %d capture groups", m[0], topicRegex, groups))
			}
		}
	}
	probe = placeholderRE.ReplaceAllString(table, "x")
	if strings.Contains(probe, "${") {
		problems = append(problems, fmt.Sprintf("%q has an unterminated ${", table))
	}
	return problems, probe
}

// SplitTemplate splits a table template at its first dot outside a
// placeholder: the database part (hasDB false and db "" when there is
// none) and the table part. The dot of ${topic.last} belongs to the
// placeholder and splits nothing.
func SplitTemplate(table string) (db, name string, hasDB bool) {
	spans := placeholderRE.FindAllStringIndex(table, -1)
	for i := 0; i < len(table); i++ {
		if len(spans) > 0 && i == spans[0][0] {
			i = spans[0][1] - 1
			spans = spans[1:]
			continue
		}
		if table[i] == '.' {
			return table[:i], table[i+1:], true
		}
	}
	return "", table, false
}

// ExpandTemplate fills table's placeholders from topic. re is the route's
// compiled, anchored topic_regex (nil without one); topicRegex, as written,
// only names it in the error, which is returned when a ${N} has no group N
// in the match (or re is nil or does not match). The result is not checked
// for being a valid table name.
func ExpandTemplate(table, topic, topicRegex string, re *regexp.Regexp) (string, error) {
	if !IsTemplate(table) {
		return table, nil
	}
	var groups []string
	var failed error
	name := placeholderRE.ReplaceAllStringFunc(table, func(ph string) string {
		switch key := ph[2 : len(ph)-1]; key {
		case "topic":
			return topic
		case "topic.last":
			return topic[strings.LastIndexByte(topic, '.')+1:]
		default:
			n, _ := strconv.Atoi(key)
			if groups == nil && re != nil {
				groups = re.FindStringSubmatch(topic)
			}
			if n < 1 || n >= len(groups) {
				failed = fmt.Errorf("%s does not match topic %q (topic_regex %q)", ph, topic, topicRegex)
				return ""
			}
			return groups[n]
		}
	})
	if failed != nil {
		return "", failed
	}
	return name, nil
}
