package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// profileSink runs the sink's default variant once more, untimed, with
// perf sampling the process, and returns its hottest functions. perf sees
// the real binary as it runs (Go keeps frame pointers and symbols), the
// franz-go and clickhouse-go goroutines and the kernel time included.
func (b *bench) profileSink(ctx context.Context) *Profile {
	data := filepath.Join(b.opt.work, "sink.perf.data")
	p := &Profile{}
	if _, err := exec.LookPath("perf"); err != nil {
		p.Error = "perf is not installed (apt-get install linux-perf)"
		return p
	}
	var rec *child
	var recErr error
	attach := func(pid int) func() {
		rec, recErr = start("perf", []string{"record", "-F", "999", "-p", fmt.Sprint(pid), "-o", data},
			filepath.Join(b.opt.work, "perf-record.log"), nil)
		return func() {
			if rec != nil {
				_ = rec.cmd.Process.Signal(syscall.SIGINT)
				_ = rec.wait(30 * time.Second)
			}
		}
	}
	r := Result{Key: "sink", Name: "sink (profiled, not timed)", Run: 0, Expected: int64(b.opt.count), Inserts: -1, Status: "ok"}
	table := "sink_profiled"
	r.Table = benchDB + "." + table
	if err := b.createTable(ctx, table); err != nil {
		p.Error = err.Error()
		return p
	}
	b.quiesce()
	logf("profiling one more sink run with perf")
	r = b.runSink(ctx, r, table, nil, attach)
	if recErr != nil {
		p.Error = "perf record: " + recErr.Error()
		return p
	}
	if !r.ok() {
		p.Error = r.Status
		return p
	}
	args := []string{"report", "-i", data, "--stdio", "--no-children", "--sort", "dso,symbol", "--percent-limit", "1"}
	p.Command = fmt.Sprintf("perf record -F 999 -p <sink pid> during a %s-record run of the default config (%.2f s, %.2f CPU-s); perf %s",
		num(float64(r.Expected)), r.WallSec, r.ClientCPUSec, strings.Join(args, " "))
	out, err := exec.CommandContext(ctx, "perf", args...).Output()
	if err != nil {
		p.Error = "perf report: " + err.Error()
		return p
	}
	p.Top = perfTop(string(out), 30)
	return p
}

// perfTop keeps the sample lines of a perf report (percentages first).
func perfTop(report string, n int) []string {
	var out []string
	for _, l := range strings.Split(report, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") || !strings.Contains(strings.Fields(t)[0], "%") {
			continue
		}
		out = append(out, strings.Join(strings.Fields(t), " "))
		if len(out) == n {
			break
		}
	}
	return out
}
