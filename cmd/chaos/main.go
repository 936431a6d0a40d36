// Command chaos runs the delivery-guarantee scenarios of internal/chaos on
// the local stack and prints a table: scenario, produced, landed (FINAL),
// duplicates before merge, DLQ, max RSS, verdict. It exits 1 if any
// scenario failed. Scenarios that restart ClickHouse or Kafka need a stack
// started by this checkout (make stack-up).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sink/internal/chaos"
)

func main() {
	only := flag.String("only", "", "comma-separated scenario names to run (default: all)")
	short := flag.Bool("short", false, "the short scale `make test` uses")
	brokers := flag.String("brokers", "127.0.0.1:9092", "Kafka brokers")
	chAddr := flag.String("clickhouse", "127.0.0.1:9000", "ClickHouse native address")
	out := flag.String("out", "", "also write the table to this file")
	flag.Parse()

	root, err := os.Getwd()
	check(err)
	work, err := os.MkdirTemp("", "sink-chaos-")
	check(err)
	bin := filepath.Join(work, "sink")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sink")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	check(build.Run())

	env := chaos.Env{Brokers: strings.Split(*brokers, ","), CHAddr: *chAddr, SinkBin: bin, RepoRoot: root, WorkDir: work, Log: os.Stderr}
	specs := chaos.Scenarios(chaos.Full)
	if *short {
		specs = chaos.Scenarios(chaos.Short)
	}
	var results []*chaos.Result
	failed := false
	for _, s := range specs {
		if *only != "" && !contains(strings.Split(*only, ","), s.Name) {
			continue
		}
		fmt.Fprintf(os.Stderr, "chaos: === %s: %d records over %s\n", s.Name, s.Records, s.Duration)
		r := chaos.Run(context.Background(), env, s)
		fmt.Fprintf(os.Stderr, "chaos: %s: ok=%v %v\n", s.Name, r.OK(), r.Problems)
		results = append(results, r)
		failed = failed || !r.OK()
	}
	fmt.Println()
	chaos.PrintTable(os.Stdout, results)
	if *out != "" {
		f, err := os.Create(*out)
		check(err)
		chaos.PrintTable(f, results)
		check(f.Close())
	}
	fmt.Printf("\nsink logs and configs: %s\n", work)
	if failed {
		os.Exit(1)
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func check(err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		os.Exit(1)
	}
}
