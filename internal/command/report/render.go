package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Text writes the per-minute table and, with a split, the before/after
// summary. Times are shown in loc.
func (r Report) Text(w io.Writer, loc *time.Location) error {
	var b strings.Builder
	zone := r.Since.In(loc).Format("MST")
	fmt.Fprintf(&b, "INSERTs into %s from %s to %s %s\n", r.Table,
		r.Since.In(loc).Format("2006-01-02 15:04:05"), r.Until.In(loc).Format("2006-01-02 15:04:05"), zone)
	if r.Cluster != "" {
		b.WriteString(r.clusterLine())
	}
	b.WriteString("(system.query_log: finished INSERTs by the minute they finished; system.part_log: new parts)\n\n")
	if err := r.minutesText(&b, loc, zone); err != nil {
		return err
	}
	if r.Split != nil {
		b.WriteString("\n")
		r.splitText(&b, loc)
	}
	if len(r.Shards) > 0 {
		b.WriteString("\n")
		if err := r.shardsText(&b); err != nil {
			return err
		}
	}
	if r.Server != nil {
		b.WriteString("\n")
		if err := r.Server.serverText(&b, loc); err != nil {
			return err
		}
	}
	for _, n := range r.Notes {
		b.WriteString("note: " + n + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// clusterLine says whose logs a cluster's report sums.
func (r Report) clusterLine() string {
	n, read := 0, 0
	for _, s := range r.Shards {
		for _, rt := range s.Replicas {
			n++
			if rt.Read {
				read++
			}
		}
	}
	of := ""
	if read < n {
		of = fmt.Sprintf("%d of ", read)
	}
	return fmt.Sprintf("on cluster %s: the sums of %s%d nodes' logs, %d shards\n", r.Cluster, of, n, len(r.Shards))
}

// minutesText writes the per-minute table and the total line (times in
// loc, named zone), or says that the range holds nothing.
func (r Report) minutesText(b *strings.Builder, loc *time.Location, zone string) error {
	if len(r.Minutes) == 0 {
		b.WriteString("no INSERTs and no new parts in this range\n")
		return nil
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "minute (" + zone + ")\tinserts\trows\trows/insert\tMiB\tp50 ms\tp99 ms\tnew parts\t"
	if r.Split != nil {
		head += "side\t"
	}
	fmt.Fprintln(tw, head)
	for _, m := range r.Minutes {
		c := r.minuteCells(m, loc)
		line := strings.Join(c[:8], "\t") + "\t"
		if r.Split != nil {
			line += c[8] + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\n" + r.totalLine() + "\n")
	return nil
}

func (r Report) splitText(b *strings.Builder, loc *time.Location) {
	b.WriteString(r.splitHeading(loc) + "\n")
	tw := tabwriter.NewWriter(b, 0, 0, 3, ' ', 0)
	for _, row := range r.summaryRows(loc) {
		fmt.Fprintln(tw, strings.TrimRight(strings.Join(row[:], "\t"), "\t"))
	}
	tw.Flush()
}

// totalLine sums up the whole range in one line.
func (r Report) totalLine() string {
	t := r.Total
	l := fmt.Sprintf("total: %s inserts, %s rows, %s rows/insert, %s inserts/min over %s with inserts",
		group(uint64(t.Inserts)), group(t.Rows), num(t.RowsPerInsert.Mean), num(t.InsertsPerMin.Mean), minutes(t.Minutes))
	if r.PartLog {
		l += ", " + group(uint64(t.NewParts)) + " new parts"
	}
	return l
}

// splitHeading names the split moment and the minute left out of both
// sides, if one holds it.
func (r Report) splitHeading(loc *time.Location) string {
	h := "before/after the split at " + r.Split.In(loc).Format("2006-01-02 15:04:05 MST")
	for _, m := range r.Minutes {
		if m.Side == "mixed" {
			h += " (the minute " + m.Start.In(loc).Format("15:04") + " holds it and is left out of both sides)"
		}
	}
	return h
}

// minuteCells are one minute's cells as the tables print them: minute,
// inserts, rows, rows/insert, MiB, p50 ms, p99 ms, new parts ("-" without
// part_log) and side.
func (r Report) minuteCells(m Minute, loc *time.Location) [9]string {
	parts := "-"
	if r.PartLog {
		parts = group(uint64(m.NewParts))
	}
	rpi, p50, p99 := "-", "-", "-"
	if m.Inserts > 0 {
		rpi, p50, p99 = num(m.RowsPerInsert), group(m.P50MS), group(m.P99MS)
	}
	return [9]string{m.Start.In(loc).Format("2006-01-02 15:04"), group(uint64(m.Inserts)), group(m.Rows), rpi,
		fmt.Sprintf("%.1f", float64(m.Bytes)/(1<<20)), p50, p99, parts, m.Side}
}

// summaryRows is the before/after table of a report with a split: a head
// row (the two sides' spans) and one row per quantity, each with its
// label, before, after and change ("" where a row has no change).
func (r Report) summaryRows(loc *time.Location) [][4]string {
	bf, af, ch := r.Before, r.After, r.Change
	span := func(name string, s *Side) string {
		if s.Minutes == 0 {
			return name + ": no inserts"
		}
		return fmt.Sprintf("%s %s-%s, %d min", name, s.From.In(loc).Format("15:04"), s.To.In(loc).Format("15:04"), s.Minutes)
	}
	rows := [][4]string{
		{"", span("before", bf), span("after", af), "change"},
		{"inserts/min", spread(bf.InsertsPerMin, bf.Minutes), spread(af.InsertsPerMin, af.Minutes), change(ch.InsertsPerMin, bf, af)},
		{"rows/insert", spread(bf.RowsPerInsert, bf.Minutes), spread(af.RowsPerInsert, af.Minutes), change(ch.RowsPerInsert, bf, af)},
		{"rows/min", spread(bf.RowsPerMin, bf.Minutes), spread(af.RowsPerMin, af.Minutes), change(ch.RowsPerMin, bf, af)},
	}
	if r.PartLog {
		rows = append(rows, [4]string{"new parts/min", side(bf, bf.PartsPerMin), side(af, af.PartsPerMin), change(ch.PartsPerMin, bf, af)})
	}
	return append(rows,
		[4]string{"p50 / p99 insert ms", ms(bf), ms(af), ""},
		[4]string{"inserts, rows", group(uint64(bf.Inserts)) + ", " + group(bf.Rows), group(uint64(af.Inserts)) + ", " + group(af.Rows), ""})
}

// shardsText is the per-shard split of a cluster report: each shard's totals
// (and inserts/min before and after a split), and what each replica logged.
func (r Report) shardsText(b *strings.Builder) error {
	b.WriteString("per shard (INSERTs each replica received, new parts written on it):\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "shard\tinserts\trows\trows/insert\tinserts/min\tp50 ms\tp99 ms\tnew parts\t"
	if r.Split != nil {
		head += "inserts/min before\tafter\t"
	}
	fmt.Fprintln(tw, head+"replicas: inserts/rows/new parts\t")
	for _, s := range r.Shards {
		t := s.Total
		parts := "-"
		if r.PartLog {
			parts = group(uint64(t.NewParts))
		}
		rpi, ipm, lat := "-", "-", "-\t-"
		if t.Minutes > 0 {
			rpi, ipm, lat = num(t.RowsPerInsert.Mean), num(t.InsertsPerMin.Mean), group(t.P50MS)+"\t"+group(t.P99MS)
		}
		line := fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s\t%s\t", s.Shard, group(uint64(t.Inserts)), group(t.Rows), rpi, ipm, lat, parts)
		if r.Split != nil {
			line += spread(s.Before.InsertsPerMin, s.Before.Minutes) + "\t" + spread(s.After.InsertsPerMin, s.After.Minutes) + "\t"
		}
		var reps []string
		for _, rt := range s.Replicas {
			if !rt.Read {
				reps = append(reps, rt.Addr+" not read")
				continue
			}
			p := "-"
			if r.PartLog {
				p = group(uint64(rt.NewParts))
			}
			reps = append(reps, fmt.Sprintf("%s %s/%s/%s", rt.Addr, group(uint64(rt.Inserts)), group(rt.Rows), p))
		}
		fmt.Fprintln(tw, line+strings.Join(reps, ", ")+"\t")
	}
	return tw.Flush()
}

func minutes(n int) string {
	if n == 1 {
		return "1 minute"
	}
	return strconv.Itoa(n) + " minutes"
}

func side(s *Side, v float64) string {
	if s.Minutes == 0 {
		return "-"
	}
	return num(v)
}

func ms(s *Side) string {
	if s.Minutes == 0 {
		return "-"
	}
	return group(s.P50MS) + " / " + group(s.P99MS)
}

// spread prints "mean (min-max)" as in "360-488 inserts/min".
func spread(s Spread, minutes int) string {
	if minutes == 0 {
		return "-"
	}
	if num(s.Min) == num(s.Max) {
		return num(s.Mean)
	}
	return fmt.Sprintf("%s (%s-%s)", num(s.Mean), num(s.Min), num(s.Max))
}

// change prints after/before as "424x fewer" or "1,700x more".
func change(r float64, before, after *Side) string {
	switch {
	case before.Minutes == 0 || after.Minutes == 0:
		return "-"
	case r == 0:
		return "none after"
	case r >= 1:
		return factor(r) + "x more"
	default:
		return factor(1/r) + "x fewer"
	}
}

func factor(f float64) string {
	if f >= 10 {
		return group(uint64(math.Round(f)))
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}

// num prints a count-like float: whole numbers with thousands separators
// from 100 on (and below when whole), one decimal otherwise.
func num(v float64) string {
	if v >= 100 || v == math.Trunc(v) {
		return group(uint64(math.Round(v)))
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// group prints n with comma thousands separators.
func group(n uint64) string {
	s := strconv.FormatUint(n, 10)
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	pre := len(s) % 3
	if pre > 0 {
		b.WriteString(s[:pre])
	}
	for i := pre; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// CSV writes one line per minute with a header; times are RFC 3339 in loc.
func (r Report) CSV(w io.Writer, loc *time.Location) error {
	cw := csv.NewWriter(w)
	head := []string{"minute", "inserts", "rows", "bytes", "rows_per_insert", "p50_ms", "p99_ms", "new_parts"}
	if r.Split != nil {
		head = append(head, "side")
	}
	cw.Write(head)
	for _, m := range r.Minutes {
		parts := ""
		if r.PartLog {
			parts = strconv.Itoa(m.NewParts)
		}
		rec := []string{m.Start.In(loc).Format(time.RFC3339), strconv.Itoa(m.Inserts), strconv.FormatUint(m.Rows, 10),
			strconv.FormatUint(m.Bytes, 10), strconv.FormatFloat(m.RowsPerInsert, 'f', 2, 64),
			strconv.FormatUint(m.P50MS, 10), strconv.FormatUint(m.P99MS, 10), parts}
		if r.Split != nil {
			rec = append(rec, m.Side)
		}
		cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
}

// JSON writes the whole report as one indented object.
func (r Report) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
