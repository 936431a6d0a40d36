package main

import (
	"bufio"
	"context"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// GoBench is one line of `go test -bench -benchmem` output.
type GoBench struct {
	Package     string             `json:"package"`
	Name        string             `json:"name"`
	N           int64              `json:"n"`
	NsPerOp     float64            `json:"ns_per_op"`
	MBPerSec    float64            `json:"mb_per_s,omitempty"`
	BytesPerOp  float64            `json:"bytes_per_op"`
	AllocsPerOp float64            `json:"allocs_per_op"`
	Extra       map[string]float64 `json:"extra,omitempty"` // b.ReportMetric units
}

// goBenchPackages are the hot path: decode, batch, offsets, and the insert
// path's block encoding and compression (writer).
var goBenchPackages = []string{"./internal/decode/", "./internal/batch/", "./internal/offsets/", "./internal/writer/"}

// goBenchCount is how often each benchmark runs; the results keep the
// run with the median ns/op.
const goBenchCount = 3

// runGoBench runs the hot-path benchmarks goBenchCount times, with
// -benchmem, and keeps each one's median run.
func runGoBench(ctx context.Context) ([]GoBench, string, error) {
	args := append([]string{"test", "-run", "^$", "-bench", ".", "-benchmem", "-count", strconv.Itoa(goBenchCount)}, goBenchPackages...)
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	return medianGoBench(parseGoBench(string(out))), "go " + strings.Join(args, " ") + " (the run with the median ns/op of each)", wrapOutput(err, out)
}

// medianGoBench keeps, per package and benchmark, the run with the median
// ns/op (of an even count, the lower middle), in first-seen order, and
// records the range of ns/op in Extra as "ns/op min" and "ns/op max".
func medianGoBench(runs []GoBench) []GoBench {
	var out []GoBench
	seen := map[string][]GoBench{}
	var order []string
	for _, g := range runs {
		k := g.Package + " " + g.Name
		if _, ok := seen[k]; !ok {
			order = append(order, k)
		}
		seen[k] = append(seen[k], g)
	}
	for _, k := range order {
		rs := seen[k]
		if len(rs) == 1 {
			out = append(out, rs[0])
			continue
		}
		slices.SortFunc(rs, func(a, b GoBench) int { return cmpFloat(a.NsPerOp, b.NsPerOp) })
		m := rs[(len(rs)-1)/2]
		extra := map[string]float64{"ns/op min": rs[0].NsPerOp, "ns/op max": rs[len(rs)-1].NsPerOp}
		for u, v := range m.Extra {
			extra[u] = v
		}
		m.Extra = extra
		out = append(out, m)
	}
	return out
}

func wrapOutput(err error, out []byte) error {
	if err == nil {
		return nil
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return &cmdError{err: err, tail: strings.Join(lines, " | ")}
}

type cmdError struct {
	err  error
	tail string
}

func (e *cmdError) Error() string { return e.err.Error() + ": " + e.tail }

// parseGoBench reads benchmark lines, noting the package from the "pkg:"
// lines go test prints before each package's results.
func parseGoBench(out string) []GoBench {
	var res []GoBench
	pkg := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		b := GoBench{Package: pkg, Name: trimProcs(f[0]), N: n}
		// the rest comes in value-unit pairs
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			switch unit := f[i+1]; unit {
			case "ns/op":
				b.NsPerOp = v
			case "MB/s":
				b.MBPerSec = v
			case "B/op":
				b.BytesPerOp = v
			case "allocs/op":
				b.AllocsPerOp = v
			default:
				if b.Extra == nil {
					b.Extra = map[string]float64{}
				}
				b.Extra[unit] = v
			}
		}
		res = append(res, b)
	}
	return res
}

// trimProcs drops the -GOMAXPROCS suffix go test appends to names.
func trimProcs(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i]
		}
	}
	return name
}
