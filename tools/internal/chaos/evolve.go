package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Evolve is a scenario's evolving route: a second topic whose records gain
// new top-level fields while the run goes on, into a table created with
// only key, v, n and the Kafka position, with schema.evolve: add_columns.
// The producer writes one record to it for every Every records of the main
// topic, with the same share of bad records; from a quarter of the run on
// they carry f_int (an integer), from half f_str (a string), from three
// quarters f_float (a number with a fraction), so the sink adds three
// columns (Int64, String, Float64) under load, across restarts.
type Evolve struct {
	Partitions int
	Every      int
}

// The fields the evolving records gain, in order, and when (a fraction of
// the main topic's records produced) each appears.
var evolvingFields = []struct {
	name, typ string
	from      float64
}{{"f_int", "Int64", 0.25}, {"f_str", "String", 0.5}, {"f_float", "Float64", 0.75}}

// evolving is the state of an Evolve route: its names and what was produced
// to it, for the check. Only the producer goroutine writes it, before the
// check reads it.
type evolving struct {
	Evolve
	topic, table string
	good, bad    int
	// withField counts the good records carrying each of evolvingFields.
	withField [3]int
	// sumInt and sumFloat are the sums of f_int and f_float produced:
	// f_int is key+1, f_float key+0.5, so every partial sum is exact in
	// a float64 whatever order ClickHouse adds them in.
	sumInt   int64
	sumFloat float64
}

// tableName is the evolving table, or "" without one.
func (e *evolving) tableName() string {
	if e == nil {
		return ""
	}
	return e.table
}

// next is the next record of the evolving topic at progress (0 to 1) of
// the run: badPercent malformed and badPercent with a key that is not a
// number, the rest good with the fields due by now.
func (e *evolving) next(rng *rand.Rand, badPercent, progress float64) []byte {
	switch x := rng.Float64() * 100; {
	case x < badPercent:
		e.bad++
		return fmt.Appendf(nil, `{"key": %d, "evolving": "broken`, e.good+e.bad)
	case x < 2*badPercent:
		e.bad++
		return fmt.Appendf(nil, `{"key": "e%d", "v": "evolving wrong type", "n": 1}`, e.good+e.bad)
	}
	k := e.good
	e.good++
	v := fmt.Appendf(nil, `{"key": %d, "v": "evolving-%d", "n": %d`, k, k, rng.IntN(1000))
	for i, f := range evolvingFields {
		if progress < f.from {
			continue
		}
		e.withField[i]++
		switch f.name {
		case "f_int":
			v = fmt.Appendf(v, `, "f_int": %d`, k+1)
			e.sumInt += int64(k + 1)
		case "f_str":
			v = fmt.Appendf(v, `, "f_str": "s-%d"`, k)
		case "f_float":
			v = fmt.Appendf(v, `, "f_float": %d.5`, k)
			e.sumFloat += float64(k) + 0.5
		}
	}
	return append(v, '}')
}

// verify requires the evolving table to hold every good key once after
// FINAL, the three columns added with the types their values imply, and
// each value as produced: f_int = key+1, f_str = "s-"+key and f_float =
// key+0.5 on exactly the records that carried them, the default (0, "")
// on the records from before the field appeared.
func (e *evolving) verify(ctx context.Context, r *run, res *Result) {
	rows, err := r.ch.Query(ctx, "SELECT name, type FROM system.columns WHERE database = 'chaos' AND table = ?", e.table)
	if err != nil {
		res.fail("evolving table columns: %v", err)
		return
	}
	types := map[string]string{}
	for rows.Next() {
		var n, t string
		if err := rows.Scan(&n, &t); err != nil {
			res.fail("evolving table columns: %v", err)
			rows.Close()
			return
		}
		types[n] = t
	}
	rows.Close()
	var added []string
	for _, f := range evolvingFields {
		if types[f.name] != f.typ {
			res.fail("evolving table %s: column %s is %q, want %s added by the sink", e.table, f.name, types[f.name], f.typ)
			return
		}
		added = append(added, f.name+" "+f.typ)
	}
	var final, distinct, minKey, maxKey, withInt, intRight, withStr, strRight, withFloat, floatRight uint64
	var sumInt int64
	var sumFloat float64
	q := "SELECT count(), uniqExact(key), min(key), max(key), " +
		"countIf(f_int != 0), countIf(f_int = toInt64(key) + 1), sum(f_int), " +
		"countIf(f_str != ''), countIf(f_str = concat('s-', toString(key))), " +
		"countIf(f_float != 0), countIf(f_float = toFloat64(key) + 0.5), sum(f_float) " +
		"FROM chaos." + e.table + " FINAL"
	if err := r.ch.QueryRow(ctx, q).Scan(&final, &distinct, &minKey, &maxKey, &withInt, &intRight, &sumInt,
		&withStr, &strRight, &withFloat, &floatRight, &sumFloat); err != nil {
		res.fail("evolving table: %v", err)
		return
	}
	var bad []string
	if final != uint64(e.good) || distinct != uint64(e.good) || e.good > 0 && (minKey != 0 || maxKey != uint64(e.good-1)) {
		bad = append(bad, fmt.Sprintf("FINAL count %d, %d distinct keys in [%d, %d], want %d in [0, %d]", final, distinct, minKey, maxKey, e.good, e.good-1))
	}
	check := func(name string, with, right uint64, want int) {
		if with != uint64(want) || right != uint64(want) {
			bad = append(bad, fmt.Sprintf("%s set on %d rows, right on %d, want %d", name, with, right, want))
		}
	}
	check("f_int", withInt, intRight, e.withField[0])
	check("f_str", withStr, strRight, e.withField[1])
	check("f_float", withFloat, floatRight, e.withField[2])
	if sumInt != e.sumInt || sumFloat != e.sumFloat {
		bad = append(bad, fmt.Sprintf("sum(f_int) %d want %d, sum(f_float) %.1f want %.1f", sumInt, e.sumInt, sumFloat, e.sumFloat))
	}
	if len(bad) > 0 {
		res.fail("evolving table %s: %s", e.table, strings.Join(bad, "; "))
		return
	}
	res.Notes = append(res.Notes, fmt.Sprintf("evolving table %d of %d, added %s, values exact (%d, %d, %d rows with them), DLQ share %d",
		final, e.good, strings.Join(added, ", "), e.withField[0], e.withField[1], e.withField[2], e.bad))
}
