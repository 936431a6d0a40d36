package config

import (
	"slices"

	"sink/internal/route"
)

// Fan-out routing: several routes may take records of one topic, told
// apart by their when: conditions. Config.Fanout says whether a record goes
// to the first route that takes it or to all of them.
const (
	FanoutFirst = "first"
	FanoutAll   = "all"
)

// Conditions returns the route's parsed when: (nil: every record). Valid
// after Validate.
func (r Route) Conditions() route.When { return r.when }

// RoutesFor returns the indexes of the routes whose topic matches topic, in
// configuration order: the candidates whose when: the pipeline evaluates per
// record.
func (c *Config) RoutesFor(topic string) []int {
	var out []int
	for i, r := range c.Routes {
		if r.Matches(topic) {
			out = append(out, i)
		}
	}
	return out
}

// validateFanout parses every route's when:, refuses routes that can never
// take a record under first-match, and the combinations fan-out does not
// support.
func (c *Config) validateFanout(p *problems) {
	p.oneOf("fanout", c.Fanout, fanouts)
	p.oneOf("errors.unrouted", c.Errors.Unrouted, unrouteds)
	if c.Errors.Unrouted == "dlq" && c.Errors.DLQTopic == "" && c.Errors.DLQTable == "" {
		p.add("errors.unrouted: dlq needs errors.dlq_topic or errors.dlq_table (and errors.tolerance: all)")
	}
	conditional := false
	for i := range c.Routes {
		r := &c.Routes[i]
		w, err := route.ParseWhen(r.Format, r.When)
		if err != nil {
			p.add("routes[%d].when: %v", i, err)
		}
		r.when = w
		conditional = conditional || len(r.When) > 0
	}
	if c.ExactlyOnce() && (conditional || c.Fanout == FanoutAll) {
		// Exactly-once rebuilds a batch from a partition's offsets alone;
		// with records of one partition split over tables by content it
		// would need a token per table and partition, which it has not.
		p.add("delivery: exactly_once does not support fan-out routing (routes with when: or fanout: all); use at_least_once with ReplacingMergeTree tables")
	}
	if c.Fanout != FanoutFirst {
		return // under fanout: all every matching route is used
	}
	// Under first-match, a route with no when: takes every record of its
	// topic, so a later route on the same literal topic never gets one.
	for j, r := range c.Routes {
		if r.Topic == "" {
			continue // a regex route may still take other topics
		}
		if i := slices.IndexFunc(c.Routes[:j], func(e Route) bool { return len(e.When) == 0 && e.Matches(r.Topic) }); i >= 0 {
			p.add("routes[%d]: never used: routes[%d] has no when: and takes every record of topic %q first (give routes[%d] a when:, or set fanout: all to feed both)", j, i, r.Topic, i)
		}
	}
}
