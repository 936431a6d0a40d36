package writer

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"

	"sink/internal/chschema"
)

// Latest reads, for each key of q.Find that t holds a live row of, the
// values of q.Cols in its live row with the largest q.Version (argMax, so
// unmerged versions and replicas' copies count alike, as FINAL would read
// them; a row marked deleted in q.Deleted does not count). Each result is
// the key's values followed by the columns', as the driver scans them (the
// element types of decode.Block.ColumnData for the common types); a key
// without a live row is absent. One query for every key, bounded by
// clickhouse.query_timeout.
func (w *Writer) Latest(ctx context.Context, t *Table, q LatestQuery) ([][]any, error) {
	if len(q.Find) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.QueryTimeout)
	defer cancel()
	query := latestSQL(t.Database, t.Name, q)
	sets := make([]clickhouse.GroupSet, len(q.Find))
	for i, k := range q.Find {
		sets[i] = clickhouse.GroupSet{Value: k}
	}
	rows, err := w.conn.Query(ctx, query, clickhouse.Named("keys", sets))
	if err != nil {
		return nil, fmt.Errorf("clickhouse: reading earlier values of %s: %w", t.FullName(), err)
	}
	defer rows.Close()
	types := rows.ColumnTypes()
	var out [][]any
	for rows.Next() {
		ptrs := make([]any, len(types))
		for i, ct := range types {
			ptrs[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("clickhouse: reading earlier values of %s: %w", t.FullName(), err)
		}
		// Leave out the tuple itself (after the keys).
		row := make([]any, 0, len(ptrs)-1)
		for i, p := range ptrs {
			if i != len(q.Keys) {
				row = append(row, reflect.ValueOf(p).Elem().Interface())
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse: reading earlier values of %s: %w", t.FullName(), err)
	}
	return out, nil
}

// latestSQL is Latest's query: SELECT keys, argMaxIf(tuple(cols),
// version, live), each element of it ... WHERE (keys) IN (@keys) GROUP BY
// keys HAVING a live row.
func latestSQL(db, table string, q LatestQuery) string {
	var b strings.Builder
	keys := make([]string, len(q.Keys))
	for i, k := range q.Keys {
		keys[i] = chschema.QuoteIdent(k)
	}
	cols := make([]string, len(q.Cols))
	for i, c := range q.Cols {
		cols[i] = chschema.QuoteIdent(c)
	}
	// One argMax over a tuple: argMax of a Nullable column alone would
	// skip the NULLs and return an older row's value.
	b.WriteString("SELECT ")
	b.WriteString(strings.Join(keys, ", "))
	live := "1"
	if q.Deleted != "" {
		live = chschema.QuoteIdent(q.Deleted) + " = 0"
	}
	fmt.Fprintf(&b, ", argMaxIf(tuple(%s), %s, %s) AS `latest`", strings.Join(cols, ", "), chschema.QuoteIdent(q.Version), live)
	for i := range q.Cols {
		fmt.Fprintf(&b, ", tupleElement(`latest`, %d)", i+1)
	}
	fmt.Fprintf(&b, " FROM %s.%s WHERE (%s) IN (@keys) GROUP BY %s HAVING countIf(%s) > 0",
		chschema.QuoteIdent(db), chschema.QuoteIdent(table), strings.Join(keys, ", "), strings.Join(keys, ", "), live)
	return b.String()
}
