package groupoffsets

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/config"
	"sink/internal/chschema"
	"sink/internal/writer"
)

// Show is `sink offsets show`: it prints the group's state and members,
// then per partition the committed offset, log start and end, lag and,
// under exactly_once, what the ledger says is pending.
func Show(ctx context.Context, cfg *config.Config, out io.Writer) error {
	g, err := OpenGroup(cfg)
	if err != nil {
		return err
	}
	defer g.Close()
	if _, err := printMembers(ctx, cfg, g, out); err != nil {
		return err
	}
	parts, err := g.Partitions(ctx, nil)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	head := "TOPIC\tPARTITION\tCOMMITTED\tLOG-START\tLOG-END\tLAG"
	if cfg.ExactlyOnce() {
		head += "\tPENDING (LEDGER)"
	}
	fmt.Fprintln(tw, head)
	for _, p := range parts {
		line := fmt.Sprintf("%s\t%d\t%s\t%s\t%s\t%s", p.TP.Topic, p.TP.Partition, num(p.Committed), num(p.Start), num(p.End), num(p.Lag()))
		if cfg.ExactlyOnce() {
			line += "\t" + p.Pending()
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// num is an offset or a count for show, "-" when unknown.
func num(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func mode(cfg *config.Config) string {
	if cfg.ExactlyOnce() {
		return "exactly_once"
	}
	return "at_least_once"
}

// printMembers prints the group's state and members and returns them.
func printMembers(ctx context.Context, cfg *config.Config, g *Group, out io.Writer) ([]string, error) {
	state, members, err := g.Members(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "group %s (delivery %s): %s, %d active member%s\n", cfg.Kafka.Group, mode(cfg), state, len(members), plural(len(members)))
	for _, m := range members {
		fmt.Fprintf(out, "  member: %s\n", m)
	}
	return members, nil
}

// MembersError is a reset refused because the group has active members.
type MembersError struct {
	Group   string
	Members []string // "client-id on host (member id)"
}

func (e *MembersError) Error() string {
	return fmt.Sprintf("group %s has %d active member%s (%s): stop every sink of the group first (SIGTERM, or PUT /connectors/NAME/stop on its HTTP listener), then run this again (docs/operations.md#offsets)",
		e.Group, len(e.Members), plural(len(e.Members)), strings.Join(e.Members, "; "))
}

// refuseMembers fails (MembersError) while the group has a member: Kafka
// takes an admin commit only from outside a live group, and a running sink
// would commit its own offsets over the reset anyway.
func refuseMembers(ctx context.Context, cfg *config.Config, g *Group, out io.Writer) error {
	members, err := printMembers(ctx, cfg, g, out)
	if err != nil {
		return err
	}
	if len(members) > 0 {
		return &MembersError{Group: cfg.Kafka.Group, Members: members}
	}
	return nil
}

// Reset is `sink offsets reset` as asked on the command line: where to,
// which partitions (Topic "" and Partition -1: all), and how.
type Reset struct {
	Target    Target
	Topic     string
	Partition int32
	// Reload deletes the rows at the new offset or later first; Yes
	// confirms a forward move; Execute acts (without it: a dry run).
	Reload, Yes, Execute bool
}

// Run previews the reset of cfg's group (every partition's move and what
// it means for the tables, then every action, in order) and, with
// Execute, carries it out: the rows deleted (Reload), the tables' tokens
// forgotten, the offsets committed. It refuses while the group has a
// member, both before the preview and right before acting.
func (r Reset) Run(ctx context.Context, cfg *config.Config, out io.Writer) error {
	g, err := OpenGroup(cfg)
	if err != nil {
		return err
	}
	defer g.Close()
	var w *writer.Writer
	conn := func(ctx context.Context) (driver.Conn, error) {
		var err error
		if w, err = writer.Open(ctx, cfg.Name, cfg.ClickHouse); err != nil {
			return nil, err
		}
		return w.Conn(), nil
	}
	defer func() {
		if w != nil {
			_ = w.Close()
		}
	}()
	return r.RunOn(ctx, cfg, g, conn, out)
}

// RunOn is Run over a group client and a ClickHouse connection the caller
// holds (the daemon's own, for Kafka Connect's offsets API): conn is asked
// for the connection once the moves are planned.
func (r Reset) RunOn(ctx context.Context, cfg *config.Config, g *Group, conn func(context.Context) (driver.Conn, error), out io.Writer) error {
	rs := &resetRun{Reset: r, cfg: cfg, out: out, g: g}
	if err := rs.plan(ctx); err != nil {
		return err
	}
	var err error
	if rs.conn, err = conn(ctx); err != nil {
		return err
	}
	for _, step := range []func(context.Context) error{rs.readTables, rs.preview, rs.actions} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	if act, err := rs.confirm(); !act {
		return err
	}
	return rs.execute(ctx)
}

// resetRun is one reset's state, step by step: the moves planned, their
// commit metadata and, with Reload, the tables whose tokens are forgotten.
type resetRun struct {
	Reset
	cfg      *config.Config
	out      io.Writer
	g        *Group
	conn     driver.Conn
	moves    []Move
	metadata []string // of moves
	tables   []tableWindow
}

// tableWindow is a table whose deduplication tokens --reload forgets.
type tableWindow struct {
	db, name string
	window   chschema.TableDedup
}

// plan refuses a live group, reads the partitions and selects the moves.
func (rs *resetRun) plan(ctx context.Context) error {
	if err := refuseMembers(ctx, rs.cfg, rs.g, rs.out); err != nil {
		return err
	}
	var at *int64
	if rs.Target.Timed {
		at = &rs.Target.AtMilli
	}
	parts, err := rs.g.Partitions(ctx, at)
	if err != nil {
		return err
	}
	if rs.moves, err = Select(parts, rs.Target, rs.Topic, rs.Partition); err != nil {
		return err
	}
	for _, r := range rs.cfg.Routes {
		if r.Target != "" && rs.Reload {
			return fmt.Errorf("--reload does not delete rows on a cluster's shards (route %s has target: %s); rewind without it, the table check skips the rows present", r.Table, r.Target)
		}
	}
	return nil
}

// readTables reads, for each move, what its tables hold at or after the
// new offset and, on a forward move, of the offsets passed over.
func (rs *resetRun) readTables(ctx context.Context) error {
	for i := range rs.moves {
		m := &rs.moves[i]
		tables, err := Tables(rs.cfg, m.TP.Topic)
		if err != nil {
			return err
		}
		for _, tb := range tables {
			h, err := HeldIn(ctx, rs.conn, tb[0], tb[1], m.TP, m.To, -1)
			if err != nil {
				return err
			}
			m.Ahead = append(m.Ahead, h)
			if m.Forward() {
				h, err := HeldIn(ctx, rs.conn, tb[0], tb[1], m.TP, m.Committed, m.To)
				if err != nil {
					return err
				}
				m.Skipped = append(m.Skipped, h)
			}
		}
	}
	return nil
}

// preview prints every move and what it means, refuses --reload on a
// table whose rows cannot be found, and works out the commit metadata.
func (rs *resetRun) preview(_ context.Context) error {
	reload := ""
	if rs.Reload {
		reload = ", --reload"
	}
	fmt.Fprintf(rs.out, "reset to %s, delivery %s%s\n", rs.Target, mode(rs.cfg), reload)
	for _, m := range rs.moves {
		for _, l := range m.Describe(rs.cfg.ExactlyOnce(), rs.Reload) {
			fmt.Fprintln(rs.out, l)
		}
		if err := rs.reloadable(m); err != nil {
			return err
		}
	}
	rs.metadata = make([]string, len(rs.moves))
	for i, m := range rs.moves {
		var err error
		if rs.metadata[i], err = m.Metadata(rs.cfg.ExactlyOnce(), rs.Reload); err != nil {
			return err
		}
	}
	return nil
}

// reloadable refuses --reload for a move into a table without the source
// columns its rows are found by.
func (rs *resetRun) reloadable(m Move) error {
	if !rs.Reload {
		return nil
	}
	for _, h := range m.Ahead {
		if h.NoSourceColumns {
			return fmt.Errorf("--reload: table %s has no _topic, _partition, _offset columns, so its rows of a partition cannot be found", h.Table)
		}
	}
	return nil
}

// actions prints the actions in the order they are taken: with --reload
// the deletes and the tables whose tokens are forgotten (their windows
// read here), then the commits.
func (rs *resetRun) actions(ctx context.Context) error {
	fmt.Fprintln(rs.out, "actions:")
	if rs.Reload {
		if err := rs.reloadActions(ctx); err != nil {
			return err
		}
	}
	for i, m := range rs.moves {
		md := "no metadata"
		if rs.metadata[i] != "" {
			md = "ledger " + rs.metadata[i]
		}
		fmt.Fprintf(rs.out, "  commit %s[%d] = %d (%s)\n", m.TP.Topic, m.TP.Partition, m.To, md)
	}
	return nil
}

// reloadActions prints the deletes of --reload and the tables whose
// deduplication tokens are forgotten. Every table's window is cleared,
// even with nothing to delete: rows removed earlier by hand leave their
// tokens.
func (rs *resetRun) reloadActions(ctx context.Context) error {
	seen := map[[2]string]bool{}
	for _, m := range rs.moves {
		for _, h := range m.Ahead {
			if tb := [2]string{h.DB, h.Name}; !seen[tb] {
				seen[tb] = true
				rs.tables = append(rs.tables, tableWindow{db: h.DB, name: h.Name})
			}
			if h.Rows > 0 {
				fmt.Fprintf(rs.out, "  delete the rows of %s[%d] at offset %d or later from %s (ALTER TABLE ... DELETE, waited for)\n", m.TP.Topic, m.TP.Partition, m.To, h.Table)
			}
		}
	}
	for i := range rs.tables {
		tw := &rs.tables[i]
		d, err := Window(ctx, rs.conn, tw.db, tw.name)
		if err != nil {
			return err
		}
		tw.window = d
		if Forgets(d) {
			fmt.Fprintf(rs.out, "  make %s.%s forget the tokens of earlier INSERTs (non_replicated_deduplication_window %s to 0 and back), so that reloaded batches are not dropped as repeats; this also forgets the tokens of other groups' pending batches into it\n", tw.db, tw.name, d.Value)
		}
	}
	return nil
}

// confirm says whether to act: a forward move needs --yes (refused with
// --execute, noted in a dry run), and a dry run ends here without error.
func (rs *resetRun) confirm() (act bool, err error) {
	forward := false
	for _, m := range rs.moves {
		forward = forward || m.Forward()
	}
	if forward && !rs.Yes {
		if rs.Execute {
			return false, fmt.Errorf("a forward move passes over records that are then never inserted (above); add --yes to confirm")
		}
		fmt.Fprintln(rs.out, "a forward move passes over records that are then never inserted: --execute needs --yes")
	}
	if !rs.Execute {
		fmt.Fprintln(rs.out, "dry run: nothing changed; run again with --execute to do it")
		return false, nil
	}
	return true, nil
}

// execute carries the actions out, after refusing once more a group that
// a sink joined since the preview.
func (rs *resetRun) execute(ctx context.Context) error {
	if err := refuseMembers(ctx, rs.cfg, rs.g, rs.out); err != nil {
		return err
	}
	if err := rs.deleteRows(ctx); err != nil {
		return err
	}
	for _, tw := range rs.tables {
		ran, err := ForgetTokens(ctx, rs.conn, tw.db, tw.name, tw.window)
		for _, s := range ran {
			fmt.Fprintf(rs.out, "ran: %s\n", s)
		}
		if err != nil {
			return err
		}
	}
	if err := rs.g.Commit(ctx, rs.moves, rs.metadata); err != nil {
		return err
	}
	fmt.Fprintf(rs.out, "done: committed %d partition%s of group %s\n", len(rs.moves), plural(len(rs.moves)), rs.cfg.Kafka.Group)
	return nil
}

// deleteRows deletes, with --reload, the rows each table holds at or
// after each move's new offset.
func (rs *resetRun) deleteRows(ctx context.Context) error {
	if !rs.Reload {
		return nil
	}
	for _, m := range rs.moves {
		for _, h := range m.Ahead {
			if h.Rows == 0 {
				continue
			}
			stmt, err := DeleteFrom(ctx, rs.conn, h.DB, h.Name, m.TP, m.To)
			if err != nil {
				return err
			}
			fmt.Fprintf(rs.out, "done: %s (%d rows)\n", stmt, h.Rows)
		}
	}
	return nil
}
