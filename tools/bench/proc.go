package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is USER_HZ, the unit of /proc/PID/stat times: 100 on every
// Linux architecture Go runs on (the kernel fixes it for user space).
const clockTick = 100

// parseStatCPU returns utime+stime in seconds from the text of
// /proc/PID/stat. The command name (field 2) may hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no ')' in %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("utime %q / stime %q are not numbers", f[11], f[12])
	}
	return float64(u+s) / clockTick, nil
}

// procCPU is the CPU seconds pid has used so far (all its threads).
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	cpu, err := parseStatCPU(string(b))
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return cpu, nil
}

// parseSystemCPU returns busy and total seconds of all CPUs from the text
// of /proc/stat (its first "cpu" line, in USER_HZ ticks).
func parseSystemCPU(stat string) (busy, total float64, err error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("first line %q is not the cpu total", line)
	}
	var idle uint64
	var sum uint64
	for i, s := range f[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("cpu field %d %q is not a number", i+1, s)
		}
		// guest and guest_nice (fields 9, 10) are already in user and nice
		if i >= 8 {
			break
		}
		sum += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return float64(sum-idle) / clockTick, float64(sum) / clockTick, nil
}

func systemCPU() (busy, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	busy, total, _ = parseSystemCPU(string(b))
	return busy, total
}

// listenerPID finds the process listening on TCP port on this machine by
// matching the socket inode in /proc/net/tcp{,6} against /proc/*/fd.
func listenerPID(port int) (int, error) {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, ino := range listeningInodes(string(b), port) {
			inodes[ino] = true
		}
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("nothing listens on port %d", port)
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		l, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(l, "socket:[") {
			continue
		}
		if inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			return pid, nil
		}
	}
	return 0, fmt.Errorf("port %d is open but no visible process holds it", port)
}

// listeningInodes returns the inodes of sockets in LISTEN state (0A) on
// port, from the text of /proc/net/tcp or tcp6.
func listeningInodes(table string, port int) []string {
	var out []string
	want := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(strings.NewReader(table))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		if len(f) < 10 || f[3] != "0A" || !strings.HasSuffix(f[1], want) {
			continue
		}
		out = append(out, f[9])
	}
	return out
}

// usage is what a finished child process cost.
type usage struct {
	CPU    float64 // user + system seconds
	MaxRSS int64   // peak resident set, bytes
}

func rusageOf(ps *os.ProcessState) usage {
	if ps == nil {
		return usage{}
	}
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return usage{}
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return usage{CPU: tv(ru.Utime) + tv(ru.Stime), MaxRSS: ru.Maxrss * 1024}
}

// cpuMeter snapshots the CPU of the servers and of the whole machine, so a
// run can report what each side spent and how busy everything else was.
type cpuMeter struct {
	chPID, kafkaPID int
}

type cpuSnap struct {
	at              time.Time
	ch, kafka       float64
	sysBusy, sysAll float64
}

func (m cpuMeter) snap() cpuSnap {
	s := cpuSnap{at: time.Now()}
	s.ch, _ = procCPU(m.chPID)
	if m.kafkaPID > 0 {
		s.kafka, _ = procCPU(m.kafkaPID)
	}
	s.sysBusy, s.sysAll = systemCPU()
	return s
}
