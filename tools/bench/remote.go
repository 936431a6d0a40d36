package main

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// runRemoteLike runs the default sink with GOMAXPROCS=procs against a
// "remote-like" ClickHouse: the server process, all its threads, pinned
// with taskset to the machine's last core for the length of the run, so
// the sink's decoding competes with it only as much as its GOMAXPROCS lets
// it spill onto that core. The server is shared and keeps running: its
// affinity is put back as it was when the run ends. Where the server
// cannot be re-pinned (taskset missing, no permission), the sink itself is
// pinned to the first core instead and the row's note says so.
func (b *bench) runRemoteLike(ctx context.Context, r Result, table, procs, bin string) Result {
	sc := sinkConf{env: []string{"GOMAXPROCS=" + procs}, bin: bin}
	last := runtime.NumCPU() - 1
	restore, err := pinProcess(b.meter.chPID, strconv.Itoa(last))
	if err != nil {
		sc.wrap = []string{"taskset", "-c", "0"}
		r.Note = fmt.Sprintf("ClickHouse could not be re-pinned (%s); the sink ran under taskset -c 0 instead", oneLine(err.Error()))
	} else {
		defer restore()
		r.Note = fmt.Sprintf("ClickHouse (pid %d, all threads) pinned with taskset to CPU %d during the run, the sink not pinned", b.meter.chPID, last)
	}
	note := r.Note
	r = b.runSinkConf(ctx, r, sc, table, nil)
	if r.Note == "" {
		r.Note = note
	} else if !strings.Contains(r.Note, note) {
		r.Note = note + "; " + r.Note
	}
	return r
}

// pinProcess sets the CPU affinity of every thread of pid to cpus (a
// taskset list) and returns the function that puts the previous mask
// back.
func pinProcess(pid int, cpus string) (func(), error) {
	if pid <= 0 {
		return nil, fmt.Errorf("ClickHouse's pid is unknown")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		return nil, fmt.Errorf("taskset is not installed")
	}
	out, err := exec.Command("taskset", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return nil, fmt.Errorf("taskset -p %d: %w", pid, err)
	}
	// "pid 123's current affinity mask: 3"
	f := strings.Fields(strings.TrimSpace(string(out)))
	if len(f) == 0 {
		return nil, fmt.Errorf("taskset -p %d: no mask in %q", pid, out)
	}
	mask := f[len(f)-1]
	if out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(pid)).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("taskset -a -p -c %s %d: %v: %s", cpus, pid, err, oneLine(string(out)))
	}
	return func() {
		if out, err := exec.Command("taskset", "-a", "-p", mask, strconv.Itoa(pid)).CombinedOutput(); err != nil {
			logf("could not restore ClickHouse's CPU affinity (mask %s): %v: %s", mask, err, oneLine(string(out)))
		}
	}, nil
}
