// Command chaos runs the delivery-guarantee scenarios of tools/internal/chaos on
// the local stack, against ClickHouse 18.16, 26.9 or both (one after the
// other), and prints a table per server: scenario, produced, landed
// (FINAL), duplicates before merge, DLQ, max RSS, verdict. It exits 1 if
// any scenario failed. Scenarios that restart ClickHouse or Kafka need the
// pid files of the checkout that started the stack (--stack-root).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"sink/tools/internal/chaos"
)

// server is one ClickHouse server of the local stack.
type server struct {
	name  string // as --clickhouse names it
	addr  string // native protocol
	stack string // its directory and pid file under .stack/
}

func main() {
	fs := flag.NewFlagSet("chaos", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: go run ./tools/chaos [flags]   (make chaos CHAOS_ARGS='...')

Runs the delivery-guarantee scenarios against the local stack and prints a
table per ClickHouse server. Scenarios: %s; kill9-mid-insert and zombie
run only when named in --only.
Examples:
  make chaos CHAOS_ARGS='--clickhouse 26 --only too-many-parts'
  go run ./tools/chaos --clickhouse 18 --only kill9,poison --short
  go run ./tools/chaos --suite kafka-cluster --clickhouse 26 --delivery exactly_once
  go run ./tools/chaos --suite cluster --only zookeeper-stop

Suites: single (the default: the single-broker Kafka and single servers),
kafka-cluster (the 3-broker Kafka of make kafka-cluster-up, topics with
replication factor 3: %s) and cluster (the ClickHouse cluster of make
cluster-up and its ZooKeeper, at_least_once: %s).

Flags:
`, strings.Join(names(chaos.Scenarios(chaos.Full)), ", "),
			strings.Join(names(chaos.KafkaClusterScenarios(chaos.Full)), ", "), strings.Join(names(chaos.ClusterScenarios(chaos.Full)), ", "))
		fs.PrintDefaults()
	}
	only := fs.String("only", "", "comma-separated scenario names to run (default: all)")
	short := fs.Bool("short", false, "the short scale (what make test runs)")
	brokers := fs.String("brokers", "127.0.0.1:9092", "Kafka brokers")
	which := fs.String("clickhouse", "both", "which ClickHouse server(s) to run the scenarios on: 18 (18.16), 26 (26.9) or both (18 first)")
	ch18 := fs.String("ch18-addr", "127.0.0.1:9000", "native address of ClickHouse 18.16")
	ch26 := fs.String("ch26-addr", "127.0.0.1:19000", "native address of ClickHouse 26.9")
	stackRoot := fs.String("stack-root", envOr("SINK_STACK_ROOT", "."),
		"the checkout whose scripts/stack.sh started the stack (its .stack/ holds the pid files the restart scenarios need; env SINK_STACK_ROOT)")
	out := fs.String("out", "", "also write the tables to this file")
	appendOut := fs.Bool("append", false, "append to --out rather than replace it (make chaos-drills puts every suite's tables in one file)")
	delivery := fs.String("delivery", "at_least_once", "the sinks' delivery: at_least_once (ReplacingMergeTree, checked with FINAL) or exactly_once (plain MergeTree, checked without FINAL: count() = produced, no (_topic, _partition, _offset) twice; ClickHouse 22.2+, so --clickhouse 26)")
	suite := fs.String("suite", "single", "which scenarios: single, kafka-cluster (the 3-broker Kafka, brokers "+strings.Join(chaos.KafkaClusterBrokers, ",")+"), cluster (the ClickHouse cluster sink_cluster and its ZooKeeper) or cluster26 (the 26.9 cluster sink26_cluster, exactly-once with target local)")
	soak := fs.Duration("soak", 0, "instead of the scenarios, a soak this long (make soak DURATION=1h): the 3-broker Kafka into the ClickHouse cluster (with an explicit --suite single: --brokers into --ch18-addr, to try a change to the soak), three routes (one a fan-out, one evolving), a SIGTERM restart every 15 min (every half of a run under 30 min), one kill -9, samples every 10 s (5 s under 30 min); results in --soak-dir")
	soakRate := fs.Float64("soak-rate", 500, "the soak's records per second into its main topic outside its bursts (5× that for 30 s of every 5 minutes; a quarter of it into the evolving topic)")
	soakDir := fs.String("soak-dir", ".stack/soak", "where the soak writes results.csv, soak.svg and soak.md")
	fs.Parse(os.Args[1:])

	if *soak > 0 {
		env := chaos.Env{Brokers: chaos.KafkaClusterBrokers, ReplicationFactor: 3, Cluster: chaos.LocalCluster()}
		switch *suite {
		case "cluster", "kafka-cluster":
		case "single":
			// Only when asked: the soak is of the clusters; the single-node
			// stack is for trying a change to the soak itself.
			if isSet(fs, "suite") {
				env = chaos.Env{Brokers: strings.Split(*brokers, ","), CHAddr: *ch18}
			}
		default:
			check(fmt.Errorf("--suite %q: want single, kafka-cluster or cluster", *suite))
		}
		os.Exit(runSoak(env, *soak, *soakRate, *soakDir, *stackRoot))
	}
	servers, err := pickServers(*which, *ch18, *ch26)
	check(err)
	if *delivery != "at_least_once" && *delivery != "exactly_once" {
		check(fmt.Errorf("--delivery %q: want at_least_once or exactly_once", *delivery))
	}
	scale := chaos.Full
	if *short {
		scale = chaos.Short
	}
	specs := chaos.Scenarios(scale)
	var cluster *chaos.ClusterEnv
	rf := 1
	switch *suite {
	case "single":
	case "kafka-cluster":
		specs = chaos.KafkaClusterScenarios(scale)
		*brokers, rf = strings.Join(chaos.KafkaClusterBrokers, ","), 3
	case "cluster":
		specs = chaos.ClusterScenarios(scale)
		if *delivery != "at_least_once" {
			check(fmt.Errorf("--suite cluster: the cluster runs ClickHouse 18.16, which has no deduplication tokens: --delivery at_least_once only"))
		}
		cluster = chaos.LocalCluster()
		servers = []server{{name: "cluster", addr: strings.Join(cluster.Addrs(), ",")}}
	case "cluster26":
		specs = chaos.Cluster26Scenarios(scale)
		if *delivery != "exactly_once" {
			check(fmt.Errorf("--suite cluster26: its scenario checks exactly-once: --delivery exactly_once"))
		}
		cluster = chaos.LocalCluster26()
		servers = []server{{name: "cluster26", addr: strings.Join(cluster.Addrs(), ",")}}
	default:
		check(fmt.Errorf("--suite %q: want single, kafka-cluster, cluster or cluster26", *suite))
	}
	if *only != "" {
		var picked []chaos.Spec
		// kill9-mid-insert runs only when named (it takes a minute).
		all := append(specs, chaos.KillMidInsert(scale), chaos.Zombie(scale))
		for _, n := range strings.Split(*only, ",") {
			s, ok := find(all, strings.TrimSpace(n))
			if !ok {
				check(fmt.Errorf("unknown scenario %q (have %s)", n, strings.Join(names(specs), ", ")))
			}
			picked = append(picked, s)
		}
		specs = picked
	}

	root, err := os.Getwd()
	check(err)
	stack, err := filepath.Abs(*stackRoot)
	check(err)
	work, err := os.MkdirTemp("", "sink-chaos-")
	check(err)
	bin := filepath.Join(work, "sink")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sink")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	check(build.Run())

	var report strings.Builder
	failed := false
	for _, srv := range servers {
		env := chaos.Env{Brokers: strings.Split(*brokers, ","), CHAddr: srv.addr, CHStack: srv.stack,
			SinkBin: bin, RepoRoot: root, StackRoot: stack, WorkDir: work, Log: os.Stderr, Delivery: *delivery,
			ReplicationFactor: rf, Cluster: cluster}
		version := chaos.ServerVersion(context.Background(), strings.Split(srv.addr, ",")[0])
		if cluster != nil {
			version += " cluster " + cluster.Name
		}
		began := time.Now()
		var results []*chaos.Result
		for _, s := range specs {
			fmt.Fprintf(os.Stderr, "chaos: === ClickHouse %s: %s: %d records over %s\n", version, s.Name, s.Records, s.Duration)
			r := chaos.Run(context.Background(), env, s)
			fmt.Fprintf(os.Stderr, "chaos: %s: ok=%v %v\n", s.Name, r.OK(), r.Problems)
			results = append(results, r)
			failed = failed || !r.OK()
		}
		fmt.Fprintf(&report, "\nClickHouse %s (%s, %s), Kafka %s, delivery %s: %d scenarios in %s\n\n", version, srv.name, srv.addr,
			*brokers, *delivery, len(results), time.Since(began).Round(time.Second))
		chaos.PrintTable(&report, results)
	}
	fmt.Print(report.String())
	if *out != "" {
		flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
		if *appendOut {
			flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
		}
		f, err := os.OpenFile(*out, flags, 0o644)
		check(err)
		_, err = f.WriteString(strings.TrimPrefix(report.String(), "\n"))
		check(err)
		check(f.Close())
	}
	fmt.Printf("\nsink logs and configs: %s\n", work)
	if failed {
		os.Exit(1)
	}
}

// pickServers turns --clickhouse into the servers to run on, in order.
func pickServers(which, addr18, addr26 string) ([]server, error) {
	s18 := server{name: "18", addr: addr18, stack: "clickhouse"}
	s26 := server{name: "26", addr: addr26, stack: "clickhouse26"}
	switch which {
	case "18", "18.16":
		return []server{s18}, nil
	case "26", "26.9":
		return []server{s26}, nil
	case "both":
		return []server{s18, s26}, nil
	}
	return nil, fmt.Errorf("--clickhouse %q: want 18, 26 or both", which)
}

func find(specs []chaos.Spec, name string) (chaos.Spec, bool) {
	for _, s := range specs {
		if s.Name == name {
			return s, true
		}
	}
	return chaos.Spec{}, false
}

func names(specs []chaos.Spec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

// soakAbout is the results file's line on the run: when it started, the
// command, the commit, the servers and the machine.
func soakAbout(env chaos.Env) string {
	commit := "unknown"
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			commit += " with uncommitted changes"
		}
	}
	target := "ClickHouse " + chaos.ServerVersion(context.Background(), env.CHAddr)
	if env.Cluster != nil {
		target = fmt.Sprintf("ClickHouse %s cluster %s (%s)", chaos.ServerVersion(context.Background(), env.Cluster.Addrs()[0]),
			env.Cluster.Name, strings.Join(env.Cluster.Addrs(), ", "))
	}
	return fmt.Sprintf("Started %s UTC: `go run ./tools/chaos %s` at commit %s; Kafka %s; %s; %d CPUs (%s/%s, %s).",
		time.Now().UTC().Format("2006-01-02 15:04"), strings.Join(os.Args[1:], " "), commit, strings.Join(env.Brokers, ", "),
		target, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// isSet reports whether the flag was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func check(err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		os.Exit(1)
	}
}

// runSoak builds the sink, runs the soak and prints its verdict; the exit
// code is 1 if it failed.
func runSoak(env chaos.Env, d time.Duration, rate float64, dir, stackRoot string) int {
	root, err := os.Getwd()
	check(err)
	stack, err := filepath.Abs(stackRoot)
	check(err)
	work, err := os.MkdirTemp("", "sink-soak-")
	check(err)
	bin := filepath.Join(work, "sink")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sink")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	check(build.Run())
	env.SinkBin, env.RepoRoot, env.StackRoot, env.WorkDir, env.Log = bin, root, stack, work, os.Stderr
	ss := chaos.SoakParams(d, rate, dir)
	ss.About = soakAbout(env)
	r := chaos.Soak(context.Background(), env, ss)
	b, _ := os.ReadFile(filepath.Join(dir, "soak.md"))
	fmt.Printf("%s\nsink logs and configs: %s\n", b, work)
	if !r.OK() {
		for _, p := range r.Problems {
			fmt.Fprintf(os.Stderr, "soak: %s\n", p)
		}
		return 1
	}
	return 0
}
