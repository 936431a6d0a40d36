package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"sink/config"
	"sink/internal/assemble"
)

// inprocessMain is `bench inprocess`: the sink's pipeline wired as `sink
// run` wires it (internal/assemble; no metrics server), inside this process, so runtime/pprof
// can watch it: a CPU profile of the whole run and a heap profile taken at
// the peak of the Go heap. It stops once the route's table holds --rows
// rows and prints the memory peaks.
func inprocessMain(args []string) error {
	fs := flag.NewFlagSet("inprocess", flag.ContinueOnError)
	path := fs.String("config", "", "sink config (one route)")
	rows := fs.Int64("rows", 1_000_000, "stop once the table holds this many rows")
	chHTTPAddr := fs.String("clickhouse-http", "http://127.0.0.1:8123/", "ClickHouse HTTP address, to count rows")
	cpuOut := fs.String("cpuprofile", "", "write a CPU profile here")
	heapOut := fs.String("memprofile", "", "write a heap profile (taken at the heap's peak) here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(*path, nil)
	if err != nil {
		return err
	}
	if len(cfg.Routes) != 1 {
		return fmt.Errorf("inprocess: the config must have exactly one route, has %d", len(cfg.Routes))
	}
	db, table := cfg.TableFor(cfg.Routes[0])
	log := zerolog.New(os.Stderr).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	parts, err := assemble.Open(ctx, cfg, nil, log)
	if err != nil {
		return err
	}
	defer parts.Close()
	parts.StartSharing()
	p, err := parts.Pipeline(ctx, cfg, log)
	if err != nil {
		return err
	}
	cons, err := parts.Consumer(ctx, cfg, log, p)
	if err != nil {
		return err
	}
	if *cpuOut != "" {
		f, err := os.Create(*cpuOut)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	runErr := make(chan error, 1)
	start := time.Now()
	go func() { runErr <- p.Run(ctx) }()

	ch := newCH(*chHTTPAddr)
	var peak runtime.MemStats
	var ms runtime.MemStats
	lastProfiled := uint64(0)
	q := fmt.Sprintf("SELECT count() FROM %s.%s", db, table)
	for n := int64(0); n < *rows; {
		select {
		case err := <-runErr:
			return fmt.Errorf("inprocess: pipeline stopped early: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > peak.HeapInuse {
			peak = ms
			// a new peak 10% above the last profiled one: profile again
			if *heapOut != "" && ms.HeapInuse > lastProfiled+lastProfiled/10 {
				if err := writeHeap(*heapOut); err != nil {
					return err
				}
				lastProfiled = ms.HeapInuse
			}
		}
		if n, err = ch.int64(ctx, q); err != nil {
			return err
		}
	}
	took := time.Since(start)
	cancel()
	err = <-runErr
	cons.Close()
	fmt.Printf("inprocess: %d rows in %.2fs; Go heap peak: HeapInuse %d MiB, HeapSys %d MiB, Sys %d MiB (GOGC %s); process VmHWM %s\n",
		*rows, took.Seconds(), peak.HeapInuse>>20, peak.HeapSys>>20, peak.Sys>>20, envOr("GOGC", "100"), vmHWM())
	return err
}

func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("heap").WriteTo(f, 0)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// vmHWM is this process's peak resident set as the kernel counts it.
func vmHWM() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
