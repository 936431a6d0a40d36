package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Scale shrinks a suite: Full is what `make chaos` runs, Short what
// `make test` runs (the scenarios that do not restart shared servers).
type Scale struct {
	Records  float64 // multiplier on record counts
	Duration float64 // multiplier on producer durations and fault timings
}

// records scales a scenario's record count, to at least 1000.
func (sc Scale) records(x int) int { return max(1000, int(float64(x)*sc.Records)) }

// scaled scales a producer duration or a fault timing.
func (sc Scale) scaled(x time.Duration) time.Duration {
	return time.Duration(float64(x) * sc.Duration)
}

var (
	Full  = Scale{Records: 1, Duration: 1}
	Short = Scale{Records: 0.12, Duration: 0.4}
)

// Scenarios returns the suite at the given scale. Names are stable: they
// select scenarios on the command line.
func Scenarios(sc Scale) []Spec {
	n := sc.records
	d := sc.scaled
	return []Spec{
		{
			Name: "kill9", Records: n(500_000), Partitions: 8, Duration: d(25 * time.Second), Buffer: "64MiB", Instances: 1,
			Faults: func(ctx context.Context, r *run) error {
				return r.killRestart(ctx, 5, func(rng *rand.Rand) time.Duration {
					return d(time.Duration(2000+rng.IntN(3000)) * time.Millisecond)
				})
			},
		},
		{
			Name: "clickhouse-restart", Records: n(300_000), Partitions: 8, Duration: d(20 * time.Second), Buffer: "64MiB", Instances: 1,
			Faults: func(ctx context.Context, r *run) error {
				sleep(ctx, d(8*time.Second))
				return r.restartServer(ctx, r.env.chStack(), 5*time.Second)
			},
		},
		{
			Name: "kafka-restart", Records: n(300_000), Partitions: 8, Duration: d(20 * time.Second), Buffer: "64MiB", Instances: 1,
			Faults: func(ctx context.Context, r *run) error {
				sleep(ctx, d(8*time.Second))
				return r.restartServer(ctx, "kafka", 3*time.Second)
			},
		},
		{
			Name: "rebalance", Records: n(300_000), Partitions: 12, Duration: d(24 * time.Second), Buffer: "64MiB", Instances: 2,
			Faults: func(ctx context.Context, r *run) error {
				sleep(ctx, d(6*time.Second))
				if err := r.startSink(); err != nil { // a third member joins
					return err
				}
				sleep(ctx, d(8*time.Second))
				return r.kill9(0) // one of the first two dies without leaving
			},
		},
		{
			// Members join one by one and every revoke is clean: each
			// flushes and commits before its partitions move, so nothing
			// is inserted twice.
			Name: "scale-out", Records: n(300_000), Partitions: 12, Duration: d(24 * time.Second), Buffer: "64MiB", Instances: 1,
			NoDuplicates: true,
			Faults: func(ctx context.Context, r *run) error {
				for i := 0; i < 2; i++ {
					sleep(ctx, d(7*time.Second))
					if err := r.startSink(); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			// Merges stopped and a low parts limit: inserts fail with 252
			// until merges run again.
			Name: "too-many-parts", Records: n(200_000), Partitions: 8, Duration: d(20 * time.Second), Buffer: "64MiB", Instances: 1,
			MaxRows:  2000,
			Settings: "parts_to_delay_insert = 3, parts_to_throw_insert = 4, max_delay_to_insert = 1",
			Faults: func(ctx context.Context, r *run) error {
				if err := r.ch.Exec(ctx, "SYSTEM STOP MERGES chaos."+r.table); err != nil {
					return err
				}
				sleep(ctx, d(15*time.Second))
				if err := r.ch.Exec(ctx, "SYSTEM START MERGES chaos."+r.table); err != nil {
					return err
				}
				// 18.16 resumes background merges only after a backoff, and
				// the limit is far below what real tables use: merge on
				// demand until the scenario ends, as caught-up merges would.
				go func() {
					for sleep(r.bg, time.Second) {
						r.ch.Exec(r.bg, "OPTIMIZE TABLE chaos."+r.table)
					}
				}()
				return nil
			},
		},
		{
			Name: "poison", Records: n(200_000), Partitions: 8, Duration: d(10 * time.Second), Buffer: "64MiB", Instances: 1,
			BadPercent: 1,
		},
		{
			// Normal rate, then ten times that while ClickHouse is down for
			// 30 s: memory must stay within the budget (fetching pauses).
			Name: "burst", Records: n(880_000), Partitions: 8, Buffer: "32MiB", Instances: 1,
			Burst:       &Burst{Rate: 8000 * sc.Records / sc.Duration, Factor: 10, Start: d(3 * time.Second), Length: d(10 * time.Second)},
			ExpectPause: true,
			Faults: func(ctx context.Context, r *run) error {
				sleep(ctx, d(2*time.Second))
				return r.restartServer(ctx, r.env.chStack(), d(30*time.Second))
			},
		},
	}
}

// Short scenarios avoid restarting the shared servers, so `make test` can
// run them beside other tests.
func ShortScenarios() []Spec {
	var out []Spec
	for _, s := range Scenarios(Short) {
		switch s.Name {
		case "kill9", "too-many-parts", "poison", "rebalance", "scale-out":
			out = append(out, s)
		}
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// restartServer stops a server of the local stack (name is its directory
// and pid file under StackRoot/.stack: clickhouse, clickhouse26 or kafka),
// keeps it down for downFor, and starts it again with StackRoot's
// scripts/stack.sh up, which starts whatever of the stack is not running.
func (r *run) restartServer(ctx context.Context, name string, downFor time.Duration) error {
	root := r.env.stackRoot()
	pidPath := filepath.Join(root, ".stack", name, name+".pid")
	b, err := os.ReadFile(pidPath)
	if err != nil {
		return fmt.Errorf("cannot restart %s: no pid file %s (was the stack started by %s? see --stack-root)", name, pidPath, root)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("pid file %s: %v", pidPath, err)
	}
	// ClickHouse 26.9 under chdb starts its system logs empty after a
	// restart: note what query_log counted so far, to add it back below
	// (an INSERT that ends between this count and the stop goes uncounted).
	var loggedBefore uint64
	isCH := name == r.env.chStack()
	if isCH {
		loggedBefore, _ = r.loggedRows(ctx)
	}
	r.logf("%s: stopping %s (pid %d) for %s", r.name, name, pid, downFor)
	syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(60 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !sleep(ctx, downFor) {
		return ctx.Err()
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "stack.sh"), "up")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("stack.sh up: %v: %s", err, out)
	}
	r.logf("%s: %s is back", r.name, name)
	if isCH {
		now, err := r.loggedRows(ctx)
		// The first query may meet a connection the restart broke.
		for i := 0; err != nil && i < 5 && sleep(ctx, 500*time.Millisecond); i++ {
			now, err = r.loggedRows(ctx)
		}
		if err == nil && now < loggedBefore {
			r.logf("%s: %s's query_log restarted empty; adding the %d rows it had logged", r.name, name, loggedBefore)
			r.loggedLost.Add(loggedBefore)
		}
	}
	return nil
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// a zombie (state Z) has exited already
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// KillMidInsert is kill9 with slow INSERTs: a materialized view counting
// the table's rows into a SummingMergeTree table sleeps 0.1 ms per row (2 s
// per 20,000-row batch), so most kills land while an INSERT is running or
// just finished and not yet committed, the moments a replay must not
// duplicate. Kills come 7-9 s apart, past the session timeout, so every new
// process gets partitions and inserts. With exactly_once the view's target
// (which has a deduplication window of its own) must count every record
// once too.
func KillMidInsert(sc Scale) Spec {
	d := sc.scaled
	return Spec{
		Name: "kill9-mid-insert", Records: max(1000, int(300_000*sc.Records)), Partitions: 8, Duration: d(10 * time.Second),
		Buffer: "64MiB", Instances: 1,
		Prepare: func(ctx context.Context, r *run) error {
			for _, q := range []string{
				"CREATE TABLE chaos." + r.table + "_count (n UInt64) ENGINE = SummingMergeTree ORDER BY tuple() SETTINGS non_replicated_deduplication_window = 1000",
				"CREATE MATERIALIZED VIEW chaos." + r.table + "_slow TO chaos." + r.table + "_count AS SELECT count() AS n FROM chaos." + r.table + " WHERE sleepEachRow(0.0001) = 0",
			} {
				if err := r.ch.Exec(ctx, q); err != nil {
					return err
				}
			}
			return nil
		},
		Faults: func(ctx context.Context, r *run) error {
			return r.killRestart(ctx, 5, func(rng *rand.Rand) time.Duration {
				return time.Duration(7000+rng.IntN(2000)) * time.Millisecond
			})
		},
		Check: func(ctx context.Context, r *run, res *Result, good int) {
			var n uint64
			if err := r.ch.QueryRow(ctx, "SELECT sum(n) FROM chaos."+r.table+"_count").Scan(&n); err != nil {
				res.fail("view target: %v", err)
				return
			}
			res.Notes = append(res.Notes, fmt.Sprintf("view counted %d rows", n))
			if r.env.exactlyOnce() && n != uint64(good) {
				res.fail("exactly-once: the materialized view counted %d rows, want %d", n, good)
			}
		},
	}
}

// killRestart kills the first running sink with SIGKILL and starts a new one,
// n times, waiting gap(rng) before each kill.
func (r *run) killRestart(ctx context.Context, n int, gap func(*rand.Rand) time.Duration) error {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for i := 0; i < n; i++ {
		if !sleep(ctx, gap(rng)) {
			return ctx.Err()
		}
		if err := r.kill9(0); err != nil {
			return err
		}
		if err := r.startSink(); err != nil {
			return err
		}
	}
	return nil
}

// Zombie pauses one of two members with SIGSTOP for 15 s, past the 6-s
// session timeout, while INSERTs are slow (KillMidInsert's view), and then
// resumes it: the other member takes its partitions over and replays what
// it had recorded, while the paused one comes back with INSERTs in flight
// and a stale generation. It may stop by itself once it resumes (with
// exactly_once a member whose partitions were taken stops rather than
// insert a batch it can no longer record); that is not a failure.
func Zombie(sc Scale) Spec {
	s := KillMidInsert(sc)
	s.Name, s.Instances = "zombie", 2
	s.Faults = func(ctx context.Context, r *run) error {
		if !sleep(ctx, 8*time.Second) {
			return ctx.Err()
		}
		r.mu.Lock()
		p := r.procs[0]
		r.mu.Unlock()
		p.killed.Store(true) // may exit on its own after it resumes
		r.logf("%s: SIGSTOP pid %d for 15s", r.name, p.cmd.Process.Pid)
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		sleep(ctx, 15*time.Second)
		r.logf("%s: SIGCONT pid %d", r.name, p.cmd.Process.Pid)
		return p.cmd.Process.Signal(syscall.SIGCONT)
	}
	return s
}
