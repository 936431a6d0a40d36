package chaos

import (
	"fmt"
	"io"
	"strings"
)

// PrintTable writes the suite's results as a markdown table.
func PrintTable(w io.Writer, results []*Result) {
	fmt.Fprintln(w, "| scenario | produced | landed (FINAL) | duplicates before merge | DLQ | max RSS | RSS limit | took | verdict |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range results {
		verdict := "PASS"
		if !r.OK() {
			verdict = "FAIL: " + strings.Join(r.Problems, "; ")
		}
		if len(r.Notes) > 0 {
			verdict += " (" + strings.Join(r.Notes, ", ") + ")"
		}
		dlq := "-"
		if r.Bad > 0 || r.DLQ > 0 {
			dlq = fmt.Sprintf("%d of %d", r.DLQ, r.Bad)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %s | %d MiB | %d MiB | %.0fs | %s |\n",
			r.Scenario, r.Produced, r.Landed, r.Duplicates, dlq, r.MaxRSS>>20, r.RSSLimit>>20, r.Took.Seconds(), verdict)
	}
}
