// Package check is `sink check`: it verifies what `sink run` would need, in
// the order run needs it (the brokers and topics, the dead-letter topic,
// the ClickHouse server, on a cluster every shard and replica with each
// target route's local table there, the schema registry when one is configured, every
// route's table and columns, exactly-once support), with the same
// constructors as run, and prints what it found. It also decodes a sample
// of each topic's newest records and lists the fields no column takes, with
// the DDL schema.evolve: add_columns would run for them (without running
// it), and for a missing table of a route with schema.create: if_missing,
// the CREATE TABLE run would execute (without executing it; that route's
// other checks need the table and are skipped).
//
// Concurrency: Run is one sequential call; it shares nothing.
package check

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/assemble"
	"sink/internal/chschema"
	"sink/internal/consumer"
	"sink/internal/decode"
	"sink/internal/pipeline"
	"sink/internal/tables"
	"sink/internal/writer"
)

// Timeout is how long a check of cfg may take: a Kafka request, a
// ClickHouse dial, 10 s for the queries and 15 s for sampling records.
func Timeout(cfg *config.Config) time.Duration {
	return cfg.Kafka.RequestTimeout + cfg.ClickHouse.DialTimeout + 25*time.Second
}

// DriftSample is how many of the newest records of each topic check
// decodes to find fields that no column takes.
const DriftSample = 200

// Run checks cfg (already valid) and prints each finding to stdout as it
// goes. It builds the daemon's parts with open (assemble.Open, as `sink
// run` does) and its pipeline over them, creating no table. It returns the
// first problem, which `run` would also stop on.
func Run(ctx context.Context, cfg *config.Config, open assemble.Opener, stdout io.Writer, o Options) error {
	c := &checker{cfg: cfg, out: stdout, opts: o}
	c.security()
	topics, err := c.kafka(ctx)
	if err != nil {
		return err
	}
	parts, err := open(ctx, cfg, nil, zerolog.Nop())
	if err != nil {
		return err
	}
	defer parts.Close()
	info, err := c.clickhouse(ctx, parts)
	if err != nil {
		return err
	}
	reg, err := c.registry(ctx, parts)
	if err != nil {
		return err
	}
	// Tables that schema.create would create: their DDL is printed, and
	// their routes are left out of the checks below, which need the table.
	c.cfg, topics, err = creates(ctx, cfg, parts, reg, topics, stdout)
	if err != nil || len(c.cfg.Routes) == 0 {
		return c.ok(err)
	}
	p, err := parts.Pipeline(ctx, c.cfg, zerolog.Nop(), pipeline.WithoutCreate())
	if err != nil {
		return err
	}
	var routed []string // the topics whose records go to a table
	for _, step := range []func() error{
		func() error { return dlqTables(ctx, c.cfg, parts.Sink, p, stdout) },
		func() (err error) { routed, err = c.routes(ctx, p, topics); return err },
		func() error { return c.drift(ctx, parts.Sampler, p, info, routed) },
		func() error { return c.delivery(ctx, parts, p) },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return c.ok(nil)
}

// checker is one check's config (fewer routes once creates has left out
// the tables schema.create would create) and where it prints.
type checker struct {
	cfg  *config.Config
	out  io.Writer
	opts Options
}

// ok prints the last line of a passed check, or returns err.
func (c *checker) ok(err error) error {
	if err == nil {
		fmt.Fprintln(c.out, "check: ok")
	}
	return err
}

// security prints the config's summary and warnings and how each
// connection authenticates (never a password).
func (c *checker) security() {
	cfg := c.cfg
	fmt.Fprintf(c.out, "config: ok (connector %q, group %q)\n", cfg.Name, cfg.Kafka.Group)
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(c.out, "config: warning: %s\n", w)
	}
	k, ch := cfg.Kafka, cfg.ClickHouse
	fmt.Fprintf(c.out, "security: kafka %s, %s\n", tlsSummary(k.TLS), saslSummary(k.SASL))
	fmt.Fprintf(c.out, "security: clickhouse %s, user %q, %s\n", tlsSummary(ch.TLS), ch.Username, password(ch.Password, ch.PasswordFile))
	if h := cfg.HTTP; h.Listen != "" {
		fmt.Fprintf(c.out, "security: http %s, pause/resume endpoints %s\n", h.Listen, adminSummary(h))
	}
}

// adminSummary says whether and how the pause/resume endpoints are open.
func adminSummary(h config.HTTP) string {
	switch {
	case h.Admin && h.AdminToken != "":
		return "on, bearer token from " + config.AdminTokenEnv
	case h.Admin:
		return "on, loopback only, no token"
	}
	return "off"
}

// kafka gets a token or credentials for a managed SASL mechanism (auth),
// reaches the brokers, prints the consumed topics and the dead-letter
// topic, and returns the topics' names in order.
func (c *checker) kafka(ctx context.Context) ([]string, error) {
	if err := c.auth(ctx); err != nil {
		return nil, err
	}
	topics, dlq, err := consumer.ProbeDLQ(ctx, c.cfg)
	if err != nil {
		return nil, err
	}
	names := slices.Sorted(maps.Keys(topics))
	for _, t := range names {
		fmt.Fprintf(c.out, "kafka: topic %s: %d partitions\n", t, topics[t])
	}
	if c.cfg.Kafka.TopicRegex != "" && len(names) == 0 {
		fmt.Fprintf(c.out, "kafka: no topic matches %q yet\n", c.cfg.Kafka.TopicRegex)
	}
	if err := c.cfg.CheckTruncates(topics); err != nil {
		return nil, err
	}
	for i, r := range c.cfg.Routes {
		if r.AppliesTruncate() {
			fmt.Fprintf(c.out, "route: routes[%d] (table %s) applies TRUNCATE events: each topic has one partition and feeds its table alone\n", i, r.Table)
		}
	}
	if dlq != nil {
		created := ""
		if dlq.Created {
			created = " (created now: errors.dlq_create)"
		}
		fmt.Fprintf(c.out, "kafka: dead-letter topic %s: %d partitions, max.message.bytes %d, writable: %s%s\n",
			dlq.Topic, dlq.Partitions, dlq.MaxMessageBytes, dlq.Writable, created)
	}
	return names, nil
}

// clickhouse prints the server and its features and, on a cluster, checks
// every shard and replica (clusterCheck).
func (c *checker) clickhouse(ctx context.Context, parts *assemble.Parts) (chschema.ServerInfo, error) {
	info, err := writer.Probe(ctx, parts.Sink.Conn())
	if err != nil {
		return info, err
	}
	fmt.Fprintf(c.out, "clickhouse: %s (protocol %s)\n", strings.Join(c.cfg.ClickHouse.Addrs, ","), c.cfg.ClickHouse.Protocol)
	for _, l := range info.Lines() {
		fmt.Fprintf(c.out, "clickhouse: %s\n", l)
	}
	if c.cfg.ClickHouse.Clustered() {
		return info, clusterCheck(ctx, c.cfg, parts, c.out)
	}
	return info, nil
}

// registry asks the schema registry, when one is configured, whether it
// answers, and returns its client (nil without one).
func (c *checker) registry(ctx context.Context, parts *assemble.Parts) (decode.Registry, error) {
	if parts.Registry == nil {
		return nil, nil
	}
	if err := parts.Registry.Check(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(c.out, "schema registry: %s answers\n", strings.Join(c.cfg.SchemaRegistry.URLs, ","))
	return parts.Registry, nil
}

// routes prints the topics no route takes, the topics whose table a
// route's template names but the route may not write (a warning: their
// records will be bad records), the routes that take records by
// condition, and each table's INSERT columns. It returns the topics whose
// records go to a table.
func (c *checker) routes(ctx context.Context, p *pipeline.Pipeline, topics []string) (routed []string, err error) {
	unrouted, bad, err := p.Catalog().ResolveTopics(ctx, topics)
	if err != nil {
		return nil, err
	}
	fate := c.unroutedFate()
	for _, t := range unrouted {
		fmt.Fprintf(c.out, "kafka: topic %s matches no route: its records will be %s\n", t, fate)
	}
	for _, te := range bad {
		fmt.Fprintf(c.out, "route: warning: topic %s: %v; its records will be %s\n", te.Topic, te, c.badFate(te.Route.Config()))
	}
	for _, t := range topics {
		if !slices.Contains(unrouted, t) && !slices.ContainsFunc(bad, func(te *tables.TopicError) bool { return te.Topic == t }) {
			routed = append(routed, t)
		}
	}
	for i, r := range c.cfg.Routes {
		if w := r.Conditions(); len(w) > 0 {
			fmt.Fprintf(c.out, "route: routes[%d] (table %s) takes the records of its topic with %s (fanout: %s; records no route takes are %s)\n",
				i, r.Table, w, c.cfg.Fanout, fate)
		}
	}
	for _, t := range p.Catalog().Targets() {
		fmt.Fprintf(c.out, "route: table %s: INSERT names %d of %d columns: %s\n",
			t.FullName(), len(t.Insert), len(t.Schema), insertColumns(t))
		decode.UnfilledDefaults(t.Schema, t.Insert, func(col chschema.ColumnSchema, why string) {
			fmt.Fprintf(c.out, "route: table %s: column %s: records' values are not inserted, the server computes it for every row: %s\n",
				t.FullName(), col.Name, why)
		})
	}
	return routed, nil
}

// badFate says what becomes of route r's bad records: with
// errors.tolerance none the first stops the connector; with all they go
// to the route's dead-letter table (its own or errors.dlq_table) and the
// dead-letter topic, whichever are set.
func (c *checker) badFate(r *config.Route) string {
	e := c.cfg.Errors
	if e.Tolerance != "all" {
		return "bad records, and the first stops the connector (errors.tolerance: none)"
	}
	var to []string
	if t := cmp.Or(r.DLQTable, e.DLQTable); t != "" {
		to = append(to, "the dead-letter table "+t)
	}
	if e.DLQTopic != "" {
		to = append(to, "the dead-letter topic "+e.DLQTopic)
	}
	return "bad records, sent to " + strings.Join(to, " and ")
}

// unroutedFate says what becomes of a record no route takes.
func (c *checker) unroutedFate() string {
	switch {
	case c.cfg.Errors.Unrouted != "dlq":
		return "skipped"
	case c.cfg.Errors.DLQTable != "":
		return "written to the dead-letter table " + c.cfg.Errors.DLQTable
	}
	return "sent to the dead-letter topic"
}

// insertColumns lists t's INSERT columns, "name type" each.
func insertColumns(t *writer.Table) string {
	cols := make([]string, len(t.Insert))
	for i, c := range t.Insert {
		cols[i] = c.Name + " " + c.Type
	}
	return strings.Join(cols, ", ")
}

// delivery prints each table's deduplication window and, under
// exactly_once, the materialized views' and whether the server and tables
// support it.
func (c *checker) delivery(ctx context.Context, parts *assemble.Parts, p *pipeline.Pipeline) error {
	conn := parts.Sink.Conn()
	windows, err := writer.DedupWindows(ctx, conn, p.Catalog().Targets())
	if err != nil {
		return err
	}
	for _, d := range windows {
		fmt.Fprintf(c.out, "route: %s\n", d)
	}
	if !c.cfg.ExactlyOnce() {
		return nil
	}
	if views, err := writer.ViewDedups(ctx, conn, p.Catalog().Targets()); err == nil {
		for _, v := range views {
			fmt.Fprintf(c.out, "route: %s\n", v)
		}
	}
	if err := p.CheckExactlyOnce(ctx); err != nil {
		return err
	}
	fmt.Fprintln(c.out, "delivery: exactly_once: server and tables support it")
	return nil
}

// drift samples the newest records of each topic and prints, per topic, the
// fields no column takes and the ALTER TABLE statements that
// schema.evolve: add_columns would run for them (a dry run: nothing is
// changed), and the columns most records leave unfilled. A column no
// sampled record fills is an error, unless the options allow it.
func (c *checker) drift(ctx context.Context, s consumer.Sampler, p *pipeline.Pipeline, info chschema.ServerInfo, topics []string) error {
	cfg, stdout := c.cfg, c.out
	if len(topics) == 0 {
		return nil
	}
	var recs []*kgo.Record
	if err := s.Records(ctx, topics, DriftSample, func(r *kgo.Record) { recs = append(recs, r) }); err != nil {
		return err
	}
	reports, err := p.Catalog().SampleDrift(ctx, recs, info)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, r := range reports {
		seen[r.Topic] = true
	}
	for _, t := range topics {
		if _, ok := cfg.RouteFor(t); ok && !seen[t] {
			fmt.Fprintf(stdout, "drift: topic %s: no records to sample\n", t)
		}
	}
	var first error
	for _, r := range reports {
		printDrift(stdout, r)
		if err := unfilled(stdout, r, c.opts); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// printDrift prints one topic's drift report.
func printDrift(stdout io.Writer, r tables.DriftReport) {
	bad := ""
	if r.Bad > 0 {
		bad = fmt.Sprintf(" (%d more did not decode)", r.Bad)
	}
	if len(r.Fields) == 0 {
		fmt.Fprintf(stdout, "drift: topic %s -> %s: every field of %d sampled records has a column%s\n", r.Topic, r.Table, r.Sampled, bad)
		return
	}
	mode := "schema.evolve is off; with add_columns it would run"
	if r.Evolve {
		mode = "schema.evolve: add_columns would run (dry run)"
	}
	fmt.Fprintf(stdout, "drift: topic %s -> %s: %d fields without a column in %d sampled records%s\n", r.Topic, r.Table, len(r.Fields), r.Sampled, bad)
	for _, f := range r.Fields {
		if f.Schema != "" {
			fmt.Fprintf(stdout, "drift:   %s: %d records, schema type %s", f.Name, f.Records, f.Schema)
		} else {
			fmt.Fprintf(stdout, "drift:   %s: %d records, e.g. %s", f.Name, f.Records, f.Example)
		}
		switch {
		case f.DDL != "" && f.DefaultLeftOut != "":
			fmt.Fprintf(stdout, "; %s: %s (without the default its schema declares: %s)\n", mode, f.DDL, f.DefaultLeftOut)
		case f.DDL != "":
			fmt.Fprintf(stdout, "; %s: %s\n", mode, f.DDL)
		default:
			fmt.Fprintf(stdout, "; not added: %s\n", f.Why)
		}
	}
}

// creates prints what schema.create: if_missing would do for each route
// that has it (a dry run: nothing is created) and returns cfg without the
// routes whose table is missing, and topics without their topics.
func creates(ctx context.Context, cfg *config.Config, parts *assemble.Parts, reg decode.Registry, topics []string, stdout io.Writer) (*config.Config, []string, error) {
	plans, err := tables.PlanCreates(ctx, cfg, parts.Sink, reg, parts.Sampler)
	if err != nil || len(plans) == 0 {
		return cfg, topics, err
	}
	missing := map[int]bool{}
	for _, pl := range plans {
		table := pl.Database + "." + pl.Table
		switch {
		case pl.Exists:
			fmt.Fprintf(stdout, "create: table %s exists: schema.create has nothing to do\n", table)
			continue
		case len(pl.DDL) == 0:
			fmt.Fprintf(stdout, "create: table %s does not exist and topic %s has no records yet: run waits for the first ones to infer the columns from\n", table, pl.Topic)
		default:
			bad := ""
			if pl.Bad > 0 {
				bad = fmt.Sprintf(" (%d more did not decode)", pl.Bad)
			}
			fmt.Fprintf(stdout, "create: table %s does not exist; from %d records sampled from topic %s%s, run would create it with:\n", table, pl.Sampled, pl.Topic, bad)
			for _, q := range pl.DDL {
				fmt.Fprintf(stdout, "create:   %s\n", q)
			}
			for _, f := range pl.Skipped {
				fmt.Fprintf(stdout, "create:   no column for %s\n", f)
			}
		}
		missing[pl.Route] = true
	}
	if len(missing) == 0 {
		return cfg, topics, nil
	}
	left := *cfg
	left.Routes = nil
	skip := map[string]bool{}
	for i, r := range cfg.Routes {
		if missing[i] {
			skip[r.Topic] = true
		} else {
			left.Routes = append(left.Routes, r)
		}
	}
	var rest []string
	for _, t := range topics {
		if !skip[t] {
			rest = append(rest, t)
		}
	}
	return &left, rest, nil
}

// password says where a password comes from, never what it is.
func password(pw config.Secret, file string) string {
	switch {
	case file != "":
		return "password from " + file
	case pw != "":
		return "password " + pw.String() // masked
	}
	return "no password"
}

func tlsSummary(t config.TLS) string {
	if !t.Enabled {
		return "TLS off"
	}
	parts := []string{"system CAs"}
	switch {
	case t.CAFile != "":
		parts[0] = "CA " + t.CAFile
	case t.TruststoreFile != "":
		parts[0] = "trust store " + t.TruststoreFile
	}
	switch {
	case t.CertFile != "":
		parts = append(parts, "client certificate "+t.CertFile)
	case t.KeystoreFile != "":
		parts = append(parts, "key store "+t.KeystoreFile)
	}
	if t.ServerName != "" {
		parts = append(parts, "server name "+t.ServerName)
	}
	if t.InsecureSkipVerify {
		parts = append(parts, "CERTIFICATES NOT VERIFIED (insecure_skip_verify)")
	}
	return "TLS (" + strings.Join(parts, ", ") + ")"
}
