package config

import (
	"fmt"
	"slices"
	"strings"
)

// The defaults that let a connector be five keys (name, kafka.brokers,
// clickhouse.addrs, one route's topic and its table), as Kafka Connect's
// ClickHouse sink needs no more than its topics and a server:
//
//   - a route's table defaults to its topic's name (Connect's default);
//   - kafka.topics, when neither it nor kafka.topic_regex is set, is every
//     route's topic, and kafka.topic_regex every route's topic_regex;
//   - routes, when none is written, are one per kafka.topics entry, each
//     into the table of the topic's name, in the default format.

// fillMinimal fills the defaults above; Validate then checks the result as
// if it had been written out.
func (c *Config) fillMinimal() {
	if len(c.Routes) == 0 && c.Kafka.TopicRegex == "" {
		for _, t := range c.Kafka.Topics {
			c.Routes = append(c.Routes, Route{Topic: t})
		}
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		if r.Table == "" && r.Topic != "" && !strings.Contains(r.Topic, ".") {
			r.Table = r.Topic
		}
	}
	if len(c.Kafka.Topics) == 0 && c.Kafka.TopicRegex == "" {
		c.Kafka.Topics, c.Kafka.TopicRegex = routeTopics(c.Routes)
	}
}

// routeTopics is what the routes read: their topics, each once, in order,
// and their topic_regex patterns joined into one ("" when none has one).
func routeTopics(routes []Route) (topics []string, regex string) {
	var patterns []string
	for _, r := range routes {
		switch {
		case r.Topic != "" && !slices.Contains(topics, r.Topic):
			topics = append(topics, r.Topic)
		case r.TopicRegex != "" && !slices.Contains(patterns, r.TopicRegex):
			patterns = append(patterns, r.TopicRegex)
		}
	}
	if len(patterns) == 1 {
		return topics, patterns[0]
	}
	for i, p := range patterns {
		patterns[i] = "(?:" + p + ")"
	}
	return topics, strings.Join(patterns, "|")
}

// missingTable says why a route has no table: Validate's words for
// routes[i].table when fillMinimal could not default it.
func missingTable(r *Route) string {
	switch {
	case r.Topic != "":
		return fmt.Sprintf("required: the topic %q has a dot, so its name would read as database.table; name the table", r.Topic)
	case r.TopicRegex != "":
		return `required with topic_regex (e.g. "${topic}", the topic's name, or "${topic.last}")`
	}
	return "required"
}
