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
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/consumer"
	"sink/internal/decode"
	"sink/internal/eos/eosio"
	"sink/internal/pipeline"
	"sink/internal/registry"
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
// goes. It returns the first problem, which `run` would also stop on.
func Run(ctx context.Context, cfg *config.Config, stdout io.Writer) error {
	fmt.Fprintf(stdout, "config: ok (connector %q, group %q)\n", cfg.Name, cfg.Kafka.Group)
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(stdout, "config: warning: %s\n", w)
	}
	k, ch := cfg.Kafka, cfg.ClickHouse
	sasl := "SASL off"
	if k.SASL.Mechanism != "" {
		sasl = fmt.Sprintf("SASL %s as %q, %s", k.SASL.Mechanism, k.SASL.Username, password(k.SASL.Password, k.SASL.PasswordFile))
	}
	fmt.Fprintf(stdout, "security: kafka %s, %s\n", tlsSummary(k.TLS), sasl)
	fmt.Fprintf(stdout, "security: clickhouse %s, user %q, %s\n", tlsSummary(ch.TLS), ch.Username, password(ch.Password, ch.PasswordFile))
	if h := cfg.HTTP; h.Listen != "" {
		admin := "off"
		switch {
		case h.Admin && h.AdminToken != "":
			admin = "on, bearer token from " + config.AdminTokenEnv
		case h.Admin:
			admin = "on, loopback only, no token"
		}
		fmt.Fprintf(stdout, "security: http %s, pause/resume endpoints %s\n", h.Listen, admin)
	}

	topics, dlq, err := consumer.ProbeDLQ(ctx, cfg)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		fmt.Fprintf(stdout, "kafka: topic %s: %d partitions\n", t, topics[t])
	}
	if cfg.Kafka.TopicRegex != "" && len(names) == 0 {
		fmt.Fprintf(stdout, "kafka: no topic matches %q yet\n", cfg.Kafka.TopicRegex)
	}
	if err := cfg.CheckTruncates(topics); err != nil {
		return err
	}
	for i, r := range cfg.Routes {
		if r.AppliesTruncate() {
			fmt.Fprintf(stdout, "route: routes[%d] (table %s) applies TRUNCATE events: each topic has one partition and feeds its table alone\n", i, r.Table)
		}
	}
	if dlq != nil {
		created := ""
		if dlq.Created {
			created = " (created now: errors.dlq_create)"
		}
		fmt.Fprintf(stdout, "kafka: dead-letter topic %s: %d partitions, max.message.bytes %d, writable: %s%s\n",
			dlq.Topic, dlq.Partitions, dlq.MaxMessageBytes, dlq.Writable, created)
	}

	w, err := writer.Open(ctx, cfg.Name, cfg.ClickHouse)
	if err != nil {
		return err
	}
	defer w.Close()
	info, err := writer.Probe(ctx, w.Conn())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "clickhouse: %s (protocol %s)\n", strings.Join(cfg.ClickHouse.Addrs, ","), cfg.ClickHouse.Protocol)
	for _, l := range info.Lines() {
		fmt.Fprintf(stdout, "clickhouse: %s\n", l)
	}
	if cfg.ClickHouse.Clustered() {
		if err := clusterCheck(ctx, cfg, w, stdout); err != nil {
			return err
		}
	}

	opts := []pipeline.Option{pipeline.WithoutCreate()}
	if cfg.ExactlyOnce() {
		io, err := eosio.NewIO(cfg, w.Conn())
		if err != nil {
			return err
		}
		defer io.Close()
		// The checks of a target: local route read every shard's local
		// table, as the running sink's do.
		if slices.ContainsFunc(cfg.Routes, func(r config.Route) bool { return r.Target != "" }) {
			cw, err := writer.OpenCluster(ctx, cfg.Name, cfg.ClickHouse, cfg.Routes)
			if err != nil {
				return err
			}
			defer cw.Close()
			io.OnCluster(cw)
		}
		opts = append(opts, pipeline.WithExactlyOnce(io))
	}
	var reg decode.Registry
	if cfg.SchemaRegistry.Enabled() {
		rc, err := registry.New(cfg.SchemaRegistry, registry.Options{})
		if err != nil {
			return err
		}
		if err := rc.Check(ctx); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "schema registry: %s answers\n", strings.Join(cfg.SchemaRegistry.URLs, ","))
		opts = append(opts, pipeline.WithRegistry(rc))
		reg = rc
	}

	// Tables that schema.create would create: their DDL is printed, and
	// their routes are left out of the checks below, which need the table.
	cfg, names, err = creates(ctx, cfg, w, reg, names, stdout)
	if err != nil {
		return err
	}
	if len(cfg.Routes) == 0 {
		fmt.Fprintln(stdout, "check: ok")
		return nil
	}
	p, err := pipeline.New(ctx, cfg, zerolog.Nop(), w, opts...)
	if err != nil {
		return err
	}
	if err := dlqTables(ctx, cfg, w, p, stdout); err != nil {
		return err
	}
	unrouted, err := p.Catalog().ResolveTopics(ctx, names)
	if err != nil {
		return err
	}
	fate := "skipped"
	if cfg.Errors.Unrouted == "dlq" {
		fate = "sent to the dead-letter topic"
		if cfg.Errors.DLQTable != "" {
			fate = "written to the dead-letter table " + cfg.Errors.DLQTable
		}
	}
	for _, t := range unrouted {
		fmt.Fprintf(stdout, "kafka: topic %s matches no route: its records will be %s\n", t, fate)
	}
	for i, r := range cfg.Routes {
		if w := r.Conditions(); len(w) > 0 {
			fmt.Fprintf(stdout, "route: routes[%d] (table %s) takes the records of its topic with %s (fanout: %s; records no route takes are %s)\n",
				i, r.Table, w, cfg.Fanout, fate)
		}
	}
	for _, t := range p.Catalog().Targets() {
		cols := make([]string, len(t.Insert))
		for i, c := range t.Insert {
			cols[i] = c.Name + " " + c.Type
		}
		fmt.Fprintf(stdout, "route: table %s: INSERT names %d of %d columns: %s\n",
			t.FullName(), len(t.Insert), len(t.Schema), strings.Join(cols, ", "))
		decode.UnfilledDefaults(t.Schema, t.Insert, func(c chschema.ColumnSchema, why string) {
			fmt.Fprintf(stdout, "route: table %s: column %s: records' values are not inserted, the server computes it for every row: %s\n",
				t.FullName(), c.Name, why)
		})
	}
	if err := drift(ctx, cfg, p, info, names, stdout); err != nil {
		return err
	}
	windows, err := writer.DedupWindows(ctx, w.Conn(), p.Catalog().Targets())
	if err != nil {
		return err
	}
	for _, d := range windows {
		fmt.Fprintf(stdout, "route: %s\n", d)
	}
	if cfg.ExactlyOnce() {
		if views, err := writer.ViewDedups(ctx, w.Conn(), p.Catalog().Targets()); err == nil {
			for _, v := range views {
				fmt.Fprintf(stdout, "route: %s\n", v)
			}
		}
		if err := p.CheckExactlyOnce(ctx); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "delivery: exactly_once: server and tables support it")
	}
	fmt.Fprintln(stdout, "check: ok")
	return nil
}

// drift samples the newest records of each topic and prints, per topic, the
// fields no column takes and the ALTER TABLE statements that
// schema.evolve: add_columns would run for them (a dry run: nothing is
// changed).
func drift(ctx context.Context, cfg *config.Config, p *pipeline.Pipeline, info chschema.ServerInfo, topics []string, stdout io.Writer) error {
	if len(topics) == 0 {
		return nil
	}
	var recs []*kgo.Record
	if err := (consumer.Sampler{Kafka: cfg.Kafka}).Records(ctx, topics, DriftSample, func(r *kgo.Record) { recs = append(recs, r) }); err != nil {
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
	for _, r := range reports {
		bad := ""
		if r.Bad > 0 {
			bad = fmt.Sprintf(" (%d more did not decode)", r.Bad)
		}
		if len(r.Fields) == 0 {
			fmt.Fprintf(stdout, "drift: topic %s -> %s: every field of %d sampled records has a column%s\n", r.Topic, r.Table, r.Sampled, bad)
			continue
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
			if f.DDL != "" && f.DefaultLeftOut != "" {
				fmt.Fprintf(stdout, "; %s: %s (without the default its schema declares: %s)\n", mode, f.DDL, f.DefaultLeftOut)
			} else if f.DDL != "" {
				fmt.Fprintf(stdout, "; %s: %s\n", mode, f.DDL)
			} else {
				fmt.Fprintf(stdout, "; not added: %s\n", f.Why)
			}
		}
	}
	return nil
}

// creates prints what schema.create: if_missing would do for each route
// that has it (a dry run: nothing is created) and returns cfg without the
// routes whose table is missing, and topics without their topics.
func creates(ctx context.Context, cfg *config.Config, w *writer.Writer, reg decode.Registry, topics []string, stdout io.Writer) (*config.Config, []string, error) {
	plans, err := tables.PlanCreates(ctx, cfg, w, reg, consumer.Sampler{Kafka: cfg.Kafka})
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
	var parts []string
	if t.CAFile != "" {
		parts = append(parts, "CA "+t.CAFile)
	} else {
		parts = append(parts, "system CAs")
	}
	if t.CertFile != "" {
		parts = append(parts, "client certificate "+t.CertFile)
	}
	if t.ServerName != "" {
		parts = append(parts, "server name "+t.ServerName)
	}
	if t.InsecureSkipVerify {
		parts = append(parts, "CERTIFICATES NOT VERIFIED (insecure_skip_verify)")
	}
	return "TLS (" + strings.Join(parts, ", ") + ")"
}
