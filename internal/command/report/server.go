package report

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// The per-server view: what one connector makes one server do, summed over
// every table it writes there. A connector names each INSERT's query_id
// sink-NAME-NANOS-BATCH-ATTEMPT (internal/writer), so its INSERTs are found
// by that prefix on every server version, whatever tables its routes
// resolve to (table templates included); each is attributed to its table by
// the statement text (InsertTarget), and the new parts are those of those
// tables in the range.

// ServerView sums every table one connector writes on one server.
type ServerView struct {
	Connector string `json:"connector"`
	// Summed is the report of every INSERT of the connector and every new
	// part of its tables, as if they were one table: minutes, total and,
	// with a split, before/after with ratios.
	Summed Report `json:"summed"`
	// Tables are the per-table shares of Summed, most INSERTs first.
	Tables []TableTotal `json:"tables"`
}

// TableTotal is one table's part of a ServerView. Its per-minute rates are
// over the server's minutes with inserts (Summed's sides), so the tables'
// rates add up to the server's.
type TableTotal struct {
	Table         string  `json:"table"`
	Inserts       int     `json:"inserts"`
	Rows          uint64  `json:"rows"`
	NewParts      int     `json:"new_parts"`
	RowsPerInsert float64 `json:"rows_per_insert"`
	InsertsPerMin float64 `json:"inserts_per_minute"`
	PartsPerMin   float64 `json:"new_parts_per_minute"`
	// InsertsPerMinBefore and After, with a split.
	InsertsPerMinBefore float64 `json:"inserts_per_minute_before,omitempty"`
	InsertsPerMinAfter  float64 `json:"inserts_per_minute_after,omitempty"`
}

// TableInsert is an Insert with the table it went into.
type TableInsert struct {
	Insert
	Table string // db.table
}

// TablePart is a Part with its table.
type TablePart struct {
	Part
	Table string // db.table
}

// ConnectorQueryID reports whether a query_id is one of connector's
// INSERTs: sink-NAME-NANOS-BATCH-ATTEMPT, and not one of a connector whose
// name merely starts with NAME- (sink-a-b-1-2-3 is connector a-b's).
func ConnectorQueryID(connector, queryID string) bool {
	rest, ok := strings.CutPrefix(queryID, "sink-"+connector+"-")
	return ok && queryIDTail.MatchString(rest)
}

var queryIDTail = regexp.MustCompile(`^[0-9]+-[0-9]+-[0-9]+$`)

// AggregateServer sums ins and parts (of the connector's tables) into a
// ServerView: Summed is Aggregate over all of them, Tables each table's
// share.
func AggregateServer(connector string, since, until time.Time, ins []TableInsert, parts []TablePart, partLog bool, split *time.Time) ServerView {
	all := make([]Insert, len(ins))
	for i, in := range ins {
		all[i] = in.Insert
	}
	allParts := make([]Part, len(parts))
	for i, p := range parts {
		allParts[i] = p.Part
	}
	v := ServerView{Connector: connector}
	v.Summed = Aggregate("every table of connector "+connector, since, until, all, allParts, partLog, split)
	side := map[int64]string{}
	for _, m := range v.Summed.Minutes {
		side[m.Start.Unix()/60] = m.Side
	}
	type acc struct {
		t             TableTotal
		before, after int
	}
	byTable := map[string]*acc{}
	get := func(name string) *acc {
		a := byTable[name]
		if a == nil {
			a = &acc{t: TableTotal{Table: name}}
			byTable[name] = a
		}
		return a
	}
	for _, in := range ins {
		a := get(in.Table)
		a.t.Inserts++
		a.t.Rows += in.Rows
		switch side[in.At.Unix()/60] {
		case "before":
			a.before++
		case "after":
			a.after++
		}
	}
	for _, p := range parts {
		get(p.Table).t.NewParts++
	}
	per := func(n int, minutes int) float64 {
		if minutes == 0 {
			return 0
		}
		return float64(n) / float64(minutes)
	}
	for _, a := range byTable {
		t := a.t
		if t.Inserts > 0 {
			t.RowsPerInsert = float64(t.Rows) / float64(t.Inserts)
		}
		t.InsertsPerMin = per(t.Inserts, v.Summed.Total.Minutes)
		t.PartsPerMin = per(t.NewParts, v.Summed.Total.Minutes)
		if split != nil {
			t.InsertsPerMinBefore = per(a.before, v.Summed.Before.Minutes)
			t.InsertsPerMinAfter = per(a.after, v.Summed.After.Minutes)
		}
		v.Tables = append(v.Tables, t)
	}
	slices.SortFunc(v.Tables, func(a, b TableTotal) int {
		if a.Inserts != b.Inserts {
			return b.Inserts - a.Inserts
		}
		return strings.Compare(a.Table, b.Table)
	})
	return v
}

// serverInsertsSQL finds a connector's INSERTs by their query_id prefix
// (position, which 18.16 has too); ConnectorQueryID decides.
const (
	serverInsertsSQL = `SELECT toUInt32(event_time) AS t, written_rows, written_bytes, query_duration_ms, query_id, substring(query, 1, %d) AS q
FROM system.query_log
WHERE event_date >= toDate(toDateTime(?)) AND event_time >= toDateTime(?) AND event_time < toDateTime(?)
  AND toInt8(type) = 2 AND position(query_id, ?) = 1`
	serverPartsSQL = `SELECT toUInt32(event_time) AS t, rows, database, table
FROM system.part_log
WHERE event_date >= toDate(toDateTime(?)) AND event_time >= toDateTime(?) AND event_time < toDateTime(?)
  AND toInt8(event_type) = 1 AND has(?, concat(database, '.', table))`
)

// QueryServer reads the per-server view of connector from the server conn
// is connected to, over o's range (o.Target is not used but for the
// database of an INSERT that names none, and o.Flush).
func QueryServer(ctx context.Context, conn driver.Conn, connector string, o Options) (ServerView, error) {
	r, err := openLogs(ctx, conn, o)
	if err != nil {
		return ServerView{}, err
	}
	ins, err := r.connectorInserts(ctx, conn, connector, o.Target.DefaultDatabase)
	if err != nil {
		return ServerView{}, err
	}
	var parts []TablePart
	if r.has["part_log"] && len(ins) > 0 {
		if parts, err = r.tableParts(ctx, conn, ins); err != nil {
			return ServerView{}, err
		}
	}
	return AggregateServer(connector, o.Since, o.Until, ins, parts, r.has["part_log"], o.Split), nil
}

// connectorInserts reads the INSERTs of connector (by their query_id),
// each with its table (in defaultDB when the statement names none).
func (r logRange) connectorInserts(ctx context.Context, conn driver.Conn, connector, defaultDB string) ([]TableInsert, error) {
	rows, err := conn.Query(ctx, fmt.Sprintf(serverInsertsSQL, queryPrefix), r.since, r.since, r.until, "sink-"+connector+"-")
	var ins []TableInsert
	err = eachRow(rows, err, "query_log", func(rows driver.Rows) error {
		var (
			t                    uint32
			wrows, wbytes, durMS uint64
			qid, q               string
		)
		if err := rows.Scan(&t, &wrows, &wbytes, &durMS, &qid, &q); err != nil {
			return err
		}
		db, table, ok := InsertTarget(q)
		if !ok || !ConnectorQueryID(connector, qid) {
			return nil
		}
		if db == "" {
			db = defaultDB
		}
		ins = append(ins, TableInsert{Insert: Insert{At: time.Unix(int64(t), 0).UTC(), Rows: wrows, Bytes: wbytes, DurationMS: durMS}, Table: db + "." + table})
		return nil
	})
	return ins, err
}

// tableParts reads the new parts of the tables ins went into.
func (r logRange) tableParts(ctx context.Context, conn driver.Conn, ins []TableInsert) ([]TablePart, error) {
	tables := map[string]bool{}
	for _, in := range ins {
		tables[in.Table] = true
	}
	rows, err := conn.Query(ctx, serverPartsSQL, r.since, r.since, r.until, slices.Sorted(maps.Keys(tables)))
	var parts []TablePart
	err = eachRow(rows, err, "part_log", func(rows driver.Rows) error {
		var t uint32
		var n uint64
		var db, table string
		if err := rows.Scan(&t, &n, &db, &table); err != nil {
			return err
		}
		parts = append(parts, TablePart{Part: Part{At: time.Unix(int64(t), 0).UTC(), Rows: n}, Table: db + "." + table})
		return nil
	})
	return parts, err
}

// serverText is the per-server view as text: the summed total, the summed
// before/after and the per-table shares.
func (v ServerView) serverText(b *strings.Builder, loc *time.Location) error {
	s := v.Summed
	fmt.Fprintf(b, "per server: every table connector %s writes (INSERTs whose query_id is the connector's, summed)\n", v.Connector)
	if len(s.Minutes) == 0 {
		b.WriteString("no INSERTs of this connector in this range\n")
		return nil
	}
	fmt.Fprintf(b, "%s, %s tables, %s new parts/min\n", s.totalLine(), group(uint64(len(v.Tables))), serverParts(s, s.Total.PartsPerMin))
	if s.Split != nil {
		s.splitText(b, loc)
	}
	b.WriteString("\nper table (rates over the server's minutes with inserts, so they add up to it):\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "table\tinserts\trows\trows/insert\tinserts/min\tnew parts\tnew parts/min\t"
	if s.Split != nil {
		head += "inserts/min before\tafter\t"
	}
	fmt.Fprintln(tw, head)
	for _, c := range v.tableCells() {
		fmt.Fprintln(tw, strings.Join(c, "\t")+"\t")
	}
	return tw.Flush()
}

// tableCells are the per-table rows as the text and HTML print them.
func (v ServerView) tableCells() [][]string {
	s := v.Summed
	var out [][]string
	for _, t := range v.Tables {
		parts, ppm := "-", "-"
		if s.PartLog {
			parts, ppm = group(uint64(t.NewParts)), num(t.PartsPerMin)
		}
		c := []string{t.Table, group(uint64(t.Inserts)), group(t.Rows), num(t.RowsPerInsert), num(t.InsertsPerMin), parts, ppm}
		if s.Split != nil {
			c = append(c, num(t.InsertsPerMinBefore), num(t.InsertsPerMinAfter))
		}
		out = append(out, c)
	}
	return out
}

// serverParts formats new parts per minute, "-" without part_log.
func serverParts(r Report, v float64) string {
	if !r.PartLog {
		return "-"
	}
	return num(v)
}
