package config

import (
	"slices"
	"testing"
)

// TestMinimalConfig: five keys make a connector; what they leave out is
// filled as Kafka Connect's sink would (the table of the topic's name) and
// as the rest of the file implies (the topics the routes read).
func TestMinimalConfig(t *testing.T) {
	cases := []struct {
		name, doc string
		topics    []string
		regex     string
		routes    [][2]string // topic or topic_regex, table
	}{
		{"routes from topics", "name: s\nkafka: {brokers: [k:9092], topics: [events, clicks]}\nclickhouse: {addrs: [ch:9000]}\n",
			[]string{"events", "clicks"}, "", [][2]string{{"events", "events"}, {"clicks", "clicks"}}},
		{"topics from routes", "name: s\nkafka: {brokers: [k:9092]}\nclickhouse: {addrs: [ch:9000]}\nroutes: [{topic: events, table: ev, when: {key: x}}, {topic: events, table: ev2}, {topic: clicks}]\n",
			[]string{"events", "clicks"}, "", [][2]string{{"events", "ev"}, {"events", "ev2"}, {"clicks", "clicks"}}},
		{"regex from routes", "name: s\nroutes: [{topic_regex: \"a.*\", table: \"${topic}\"}, {topic_regex: \"b.*\", table: b}, {topic: c}]\n",
			[]string{"c"}, "(?:a.*)|(?:b.*)", [][2]string{{"a.*", "${topic}"}, {"b.*", "b"}, {"c", "c"}}},
		{"one regex kept as written", "name: s\nroutes: [{topic_regex: \"a.*\", table: a}]\n",
			nil, "a.*", [][2]string{{"a.*", "a"}}},
	}
	for _, tc := range cases {
		c, err := Parse([]byte(tc.doc), nil)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.Equal(c.Kafka.Topics, tc.topics) || c.Kafka.TopicRegex != tc.regex {
			t.Errorf("%s: kafka.topics %q, topic_regex %q; want %q, %q", tc.name, c.Kafka.Topics, c.Kafka.TopicRegex, tc.topics, tc.regex)
		}
		var got [][2]string
		for _, r := range c.Routes {
			got = append(got, [2]string{r.Topic + r.TopicRegex, r.Table})
			if r.Format != "json" {
				t.Errorf("%s: route %s format %q, want json", tc.name, r.Topic, r.Format)
			}
		}
		if !slices.Equal(got, tc.routes) {
			t.Errorf("%s: routes %q, want %q", tc.name, got, tc.routes)
		}
	}
}
