package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// PrintTable writes the suite's results as a markdown table, then each
// scenario's committed offsets and what its sinks' logs said.
func PrintTable(w io.Writer, results []*Result) {
	fmt.Fprintln(w, "| scenario | delivery | produced | landed (FINAL) | duplicates before merge | DLQ | longest without INSERT | max RSS | RSS limit | retries by code | took | verdict |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
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
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %s | %.0fs | %d MiB | %d MiB | %s | %.0fs | %s |\n",
			r.Scenario, r.Delivery, r.Produced, r.Landed, r.Duplicates, dlq, r.MaxGap.Seconds(), r.MaxRSS>>20, r.RSSLimit>>20,
			retries(r.Retries), r.Took.Seconds(), verdict)
	}
	fmt.Fprintln(w)
	for _, r := range results {
		fmt.Fprintf(w, "- %s (%s): committed offsets at the end (partition:offset) %s", r.Scenario, r.Delivery, strings.Join(r.Offsets, " "))
		if len(r.Log) > 0 {
			logged := r.Log
			if len(logged) > 6 {
				logged = append(logged[:6:6], fmt.Sprintf("%d more", len(r.Log)-6))
			}
			fmt.Fprintf(w, "; the sinks logged: %s", strings.Join(logged, "; "))
		}
		fmt.Fprintln(w)
	}
}

// retries is "242×3, 999×1", or "-".
func retries(m map[int32]int) string {
	if len(m) == 0 {
		return "-"
	}
	var codes []int32
	for c := range m {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	parts := make([]string, len(codes))
	for i, c := range codes {
		name := fmt.Sprint(c)
		if c == 0 {
			name = "network"
		}
		parts[i] = fmt.Sprintf("%s×%d", name, m[c])
	}
	return strings.Join(parts, ", ")
}
