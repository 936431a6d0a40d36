package advise

import (
	"fmt"
	"io"
	"text/tabwriter"

	"sink/config"
)

// Print writes a for a reader: the arithmetic, the settings now and
// advised side by side (cur is the running config), what to expect, the
// warnings, and the advice as YAML to paste into the config.
func (a Advice) Print(w io.Writer, cur *config.Config) {
	fmt.Fprintln(w, "\nthe arithmetic:")
	for _, s := range a.Steps {
		fmt.Fprintln(w, "  "+s)
	}
	fmt.Fprintln(w, "\nrecommended (now → advised):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(key string, now, adv any) { fmt.Fprintf(tw, "  %s\t%v\t→ %v\n", key, now, adv) }
	row("kafka.fetch_min_bytes", cur.Kafka.FetchMinBytes, a.FetchMinBytes)
	row("kafka.fetch_max_wait", cur.Kafka.FetchMaxWait, a.FetchMaxWait)
	row("kafka.request_timeout", cur.Kafka.RequestTimeout, a.RequestTimeout)
	row("batch.max_rows", cur.Batch.MaxRows, a.MaxRows)
	row("batch.max_bytes", cur.Batch.MaxBytes, a.MaxBytes)
	row("batch.max_latency", cur.Batch.MaxLatency, a.MaxWait+a.FetchMaxWait)
	tw.Flush()
	fmt.Fprintln(w, "\nexpected:")
	for _, t := range a.Tables {
		fmt.Fprintf(w, "  %s: %.1f inserts/min, %.0f rows/insert\n", t.Name, t.InsertsPerMinute, t.RowsPerInsert)
	}
	fmt.Fprintf(w, "  latency: at most %s from produce to the start of its INSERT\n", a.Latency)
	for _, s := range a.Warnings {
		fmt.Fprintln(w, "warning: "+s)
	}
	fmt.Fprintf(w, "\nas YAML:\n%s", a.YAML())
}
