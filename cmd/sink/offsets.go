package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/command/groupoffsets"
	"sink/internal/writer"
)

const offsetsUsage = `Usage: sink offsets show  --config FILE
       sink offsets reset --config FILE (--to WHERE | TOPIC:PARTITION=OFFSET ...)
                          [--topic T] [--partition N] [--reload] [--yes] [--execute]

The connector's consumer group (kafka.group) and its committed offsets.

show   per partition: committed offset, log start and end, lag and, with
       delivery: exactly_once, what the commit metadata (the ledger) says is
       pending; and whether the group has active members.

reset  moves the committed offsets of the selected partitions to --to
       earliest, latest, a time (2026-12-01T10:00:00Z) or a duration back
       (-2h), or to explicit TOPIC:PARTITION=OFFSET values. It is a dry run
       unless --execute is given: it prints every partition's move and what
       it means for the tables, then every action it would take. Refused while
       the group has a member: stop every sink of the group first (SIGTERM;
       a clean stop flushes, commits and leaves the group; a paused sink
       stays a member).
       exactly_once: on a rewind, records whose rows the table holds (by
       _offset) are skipped; --reload deletes those rows first so that they
       are loaded again, once. at_least_once: a rewind inserts the records
       again (duplicates unless the table is a ReplacingMergeTree); --reload
       deletes the rows first. A forward move skips records for good and
       needs --yes.

Flags:
`

func offsetsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "show" && args[0] != "reset") {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
			fmt.Fprint(stdout, offsetsUsage)
			return 0
		}
		fmt.Fprint(stderr, offsetsUsage)
		return 2
	}
	sub := args[0]
	fs := flag.NewFlagSet("offsets "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, offsetsUsage); fs.PrintDefaults() }
	path := fs.String("config", "", "the connector's YAML config (required)")
	to := fs.String("to", "", "reset: earliest, latest, an RFC 3339 time or a duration back (-2h)")
	topic := fs.String("topic", "", "reset: only this topic's partitions")
	partition := fs.Int("partition", -1, "reset: only this partition (with --topic)")
	reload := fs.Bool("reload", false, "reset: delete the rows at the new offset or later from the tables first, so the records load again exactly once")
	yes := fs.Bool("yes", false, "reset: confirm a forward move (the records passed over are never inserted)")
	execute := fs.Bool("execute", false, "reset: do it (without: a dry run that prints what it would do)")
	// Explicit TOPIC:PARTITION=OFFSET values may stand among the flags.
	var explicit []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			return parseExit(err)
		}
		if fs.NArg() == 0 {
			break
		}
		explicit = append(explicit, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	usageErr := func(msg string) int {
		fmt.Fprintf(stderr, "sink offsets %s: %s\n", sub, msg)
		return 2
	}
	if *path == "" {
		return usageErr("--config FILE is required")
	}
	var target groupoffsets.Target
	if sub == "show" {
		if len(explicit) > 0 || *to != "" || *reload || *yes || *execute || *topic != "" || *partition >= 0 {
			return usageErr("takes only --config")
		}
	} else {
		var err error
		switch {
		case (*to == "") == (len(explicit) == 0):
			return usageErr("give either --to or TOPIC:PARTITION=OFFSET values")
		case *to != "":
			target, err = groupoffsets.ParseTo(*to, time.Now())
		default:
			target.Explicit, err = groupoffsets.ParseExplicit(explicit)
		}
		if err != nil {
			return usageErr(err.Error())
		}
		if *partition >= 0 && *topic == "" {
			return usageErr("--partition needs --topic")
		}
	}
	cfg, err := config.Load(*path, os.Environ())
	if err != nil {
		fmt.Fprintf(stderr, "sink offsets: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	o := &offsetsRun{cfg: cfg, out: stdout}
	if sub == "show" {
		err = o.show(ctx)
	} else {
		err = o.reset(ctx, target, *topic, int32(*partition), *reload, *yes, *execute)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sink offsets %s: %v\n", sub, err)
		return 1
	}
	return 0
}

// offsetsRun is one `sink offsets` command against cfg's group.
type offsetsRun struct {
	cfg *config.Config
	out io.Writer
}

func (o *offsetsRun) mode() string {
	if o.cfg.ExactlyOnce() {
		return "exactly_once"
	}
	return "at_least_once"
}

// members prints the group's state and members and returns them.
func (o *offsetsRun) members(ctx context.Context, g *groupoffsets.Group) ([]string, error) {
	state, members, err := g.Members(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.out, "group %s (delivery %s): %s, %d active member%s\n", o.cfg.Kafka.Group, o.mode(), state, len(members), map[bool]string{true: "", false: "s"}[len(members) == 1])
	for _, m := range members {
		fmt.Fprintf(o.out, "  member: %s\n", m)
	}
	return members, nil
}

func (o *offsetsRun) show(ctx context.Context) error {
	g, err := groupoffsets.OpenGroup(o.cfg)
	if err != nil {
		return err
	}
	defer g.Close()
	if _, err := o.members(ctx, g); err != nil {
		return err
	}
	parts, err := g.Partitions(ctx, nil)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(o.out, 0, 0, 2, ' ', 0)
	head := "TOPIC\tPARTITION\tCOMMITTED\tLOG-START\tLOG-END\tLAG"
	if o.cfg.ExactlyOnce() {
		head += "\tPENDING (LEDGER)"
	}
	fmt.Fprintln(tw, head)
	num := func(n int64) string {
		if n < 0 {
			return "-"
		}
		return fmt.Sprint(n)
	}
	for _, p := range parts {
		line := fmt.Sprintf("%s\t%d\t%s\t%s\t%s\t%s", p.TP.Topic, p.TP.Partition, num(p.Committed), num(p.Start), num(p.End), num(p.Lag()))
		if o.cfg.ExactlyOnce() {
			line += "\t" + p.Pending()
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

func (o *offsetsRun) reset(ctx context.Context, t groupoffsets.Target, topic string, partition int32, reload, yes, execute bool) error {
	g, err := groupoffsets.OpenGroup(o.cfg)
	if err != nil {
		return err
	}
	defer g.Close()
	if err := o.refuseMembers(ctx, g); err != nil {
		return err
	}
	var at *int64
	if t.Timed {
		at = &t.AtMilli
	}
	parts, err := g.Partitions(ctx, at)
	if err != nil {
		return err
	}
	moves, err := groupoffsets.Select(parts, t, topic, partition)
	if err != nil {
		return err
	}
	for _, r := range o.cfg.Routes {
		if r.Target != "" && reload {
			return fmt.Errorf("--reload does not delete rows on a cluster's shards (route %s has target: %s); rewind without it, the table check skips the rows present", r.Table, r.Target)
		}
	}
	w, err := writer.Open(ctx, o.cfg.Name, o.cfg.ClickHouse)
	if err != nil {
		return err
	}
	defer w.Close()
	conn := w.Conn()
	if err := o.tableFacts(ctx, conn, moves); err != nil {
		return err
	}

	fmt.Fprintf(o.out, "reset to %s, delivery %s%s\n", t, o.mode(), map[bool]string{true: ", --reload", false: ""}[reload])
	forward := false
	for _, m := range moves {
		for _, l := range m.Describe(o.cfg.ExactlyOnce(), reload) {
			fmt.Fprintln(o.out, l)
		}
		forward = forward || m.Forward()
		if reload {
			for _, h := range m.Ahead {
				if h.NoSourceColumns {
					return fmt.Errorf("--reload: table %s has no _topic, _partition, _offset columns, so its rows of a partition cannot be found", h.Table)
				}
			}
		}
	}
	metadata := make([]string, len(moves))
	for i, m := range moves {
		if metadata[i], err = m.Metadata(o.cfg.ExactlyOnce(), reload); err != nil {
			return err
		}
	}
	// The actions, in the order they are taken.
	fmt.Fprintln(o.out, "actions:")
	tables := map[[2]string]bool{}
	var tableOrder [][2]string
	var windows []chschema.TableDedup // of tableOrder
	if reload {
		for _, m := range moves {
			for _, h := range m.Ahead {
				// Every table's window is cleared, even with nothing to
				// delete: rows removed earlier by hand leave their tokens.
				if tb := [2]string{h.DB, h.Name}; !tables[tb] {
					tables[tb] = true
					tableOrder = append(tableOrder, tb)
				}
				if h.Rows > 0 {
					fmt.Fprintf(o.out, "  delete the rows of %s[%d] at offset %d or later from %s (ALTER TABLE ... DELETE, waited for)\n", m.TP.Topic, m.TP.Partition, m.To, h.Table)
				}
			}
		}
		for _, tb := range tableOrder {
			d, err := groupoffsets.Window(ctx, conn, tb[0], tb[1])
			if err != nil {
				return err
			}
			windows = append(windows, d)
			if groupoffsets.Forgets(d) {
				fmt.Fprintf(o.out, "  make %s.%s forget the tokens of earlier INSERTs (non_replicated_deduplication_window %s to 0 and back), so that reloaded batches are not dropped as repeats; this also forgets the tokens of other groups' pending batches into it\n", tb[0], tb[1], d.Value)
			}
		}
	}
	for i, m := range moves {
		md := "no metadata"
		if metadata[i] != "" {
			md = "ledger " + metadata[i]
		}
		fmt.Fprintf(o.out, "  commit %s[%d] = %d (%s)\n", m.TP.Topic, m.TP.Partition, m.To, md)
	}
	if forward && !yes {
		if execute {
			return fmt.Errorf("a forward move passes over records that are then never inserted (above); add --yes to confirm")
		}
		fmt.Fprintln(o.out, "a forward move passes over records that are then never inserted: --execute needs --yes")
	}
	if !execute {
		fmt.Fprintln(o.out, "dry run: nothing changed; run again with --execute to do it")
		return nil
	}
	// Right before acting: a sink started since the preview holds the group.
	if err := o.refuseMembers(ctx, g); err != nil {
		return err
	}
	for _, m := range moves {
		for _, h := range m.Ahead {
			if !reload || h.Rows == 0 {
				continue
			}
			stmt, err := groupoffsets.DeleteFrom(ctx, conn, h.DB, h.Name, m.TP, m.To)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.out, "done: %s (%d rows)\n", stmt, h.Rows)
		}
	}
	for i, tb := range tableOrder {
		ran, err := groupoffsets.ForgetTokens(ctx, conn, tb[0], tb[1], windows[i])
		for _, s := range ran {
			fmt.Fprintf(o.out, "ran: %s\n", s)
		}
		if err != nil {
			return err
		}
	}
	if err := g.Commit(ctx, moves, metadata); err != nil {
		return err
	}
	fmt.Fprintf(o.out, "done: committed %d partition%s of group %s\n", len(moves), map[bool]string{true: "", false: "s"}[len(moves) == 1], o.cfg.Kafka.Group)
	return nil
}

// refuseMembers fails while the group has a member: Kafka takes an admin
// commit only from outside a live group, and a running sink would commit
// its own offsets over the reset anyway.
func (o *offsetsRun) refuseMembers(ctx context.Context, g *groupoffsets.Group) error {
	members, err := o.members(ctx, g)
	if err != nil {
		return err
	}
	if len(members) > 0 {
		return fmt.Errorf("group %s has %d active member%s (%s): stop every sink of the group first (SIGTERM), then run this again (docs/operations.md#offsets)",
			o.cfg.Kafka.Group, len(members), map[bool]string{true: "", false: "s"}[len(members) == 1], strings.Join(members, "; "))
	}
	return nil
}

// tableFacts reads, for each move, what its tables hold at or after the
// new offset and, on a forward move, of the offsets passed over.
func (o *offsetsRun) tableFacts(ctx context.Context, conn driver.Conn, moves []groupoffsets.Move) error {
	for i := range moves {
		m := &moves[i]
		tables, err := groupoffsets.Tables(o.cfg, m.TP.Topic)
		if err != nil {
			return err
		}
		for _, tb := range tables {
			h, err := groupoffsets.HeldIn(ctx, conn, tb[0], tb[1], m.TP, m.To, -1)
			if err != nil {
				return err
			}
			m.Ahead = append(m.Ahead, h)
			if m.Forward() {
				h, err := groupoffsets.HeldIn(ctx, conn, tb[0], tb[1], m.TP, m.Committed, m.To)
				if err != nil {
					return err
				}
				m.Skipped = append(m.Skipped, h)
			}
		}
	}
	return nil
}
