package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// formatTopic is the topic holding the workload framed for the schema
// registry in format f (loadgen --format f).
func (b *bench) formatTopic(f string) string { return b.topic + "_" + strings.ReplaceAll(f, "-", "_") }

// produceFormats produces the workload once more for each registry format
// a selected variant needs: the same events (same count, size, seed,
// partitions and skew) re-encoded by loadgen --format f. A format this
// build's config does not know as a route format, or that loadgen cannot
// produce, is recorded in b.formatSkip and its variant is not run.
func (b *bench) produceFormats(ctx context.Context) {
	b.formatSkip, b.formatBytes = map[string]string{}, map[string]float64{}
	for _, key := range b.opt.variants {
		f := registryFormats[key]
		if f == "" {
			continue
		}
		sc := sinkConf{name: "bench-check", group: "bench-check", topic: b.formatTopic(f), table: "t",
			brokers: b.opt.brokers, chAddrs: []string{"127.0.0.1:9000"}, format: f, registry: b.opt.registry}
		if _, err := sc.parse(); err != nil {
			b.formatSkip[f] = fmt.Sprintf("this build does not take route format %q (%s)", f, oneLine(err.Error()))
			logf("%s: %s", key, b.formatSkip[f])
			continue
		}
		args := []string{"--brokers", strings.Join(b.opt.brokers, ","), "--topic", b.formatTopic(f), "--recreate",
			"--count", fmt.Sprint(b.opt.count), "--partitions", fmt.Sprint(b.opt.partitions), "--size", fmt.Sprint(b.opt.size),
			"--seed", fmt.Sprint(b.opt.seed), "--skew", fmt.Sprint(b.opt.skew), "--format", f, "--registry", b.opt.registry}
		logf("producing the workload as %s: loadgen %s", f, strings.Join(args, " "))
		out, err := exec.CommandContext(ctx, b.opt.loadgenBin, args...).CombinedOutput()
		if err != nil {
			b.formatSkip[f] = fmt.Sprintf("loadgen --format %s failed: %v: %s", f, err, oneLine(lastLine(string(out))))
			logf("%s: %s", key, b.formatSkip[f])
			continue
		}
		logf("%s", oneLine(lastLine(string(out))))
		b.formatTopics = append(b.formatTopics, b.formatTopic(f))
		// loadgen's last line: "loadgen: produced N F events (B bytes) to T in ..."
		var n, size int64
		var ff string
		if i := strings.Index(lastLine(string(out)), "produced "); i >= 0 {
			fmt.Sscanf(lastLine(string(out))[i:], "produced %d %s events (%d bytes)", &n, &ff, &size)
		}
		b.formatBytes[f] = float64(size) / float64(max(n, 1))
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
