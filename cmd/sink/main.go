// Command sink moves Kafka topics into ClickHouse in large, few inserts.
//
// main only parses the command line, wires the components and stops them
// in reverse order; everything else lives in internal/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"sink/config"
	"sink/internal/assemble"
	"sink/internal/command/check"
)

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

const usage = `sink moves Kafka topics into ClickHouse in large, few inserts.

Usage:
  sink run     --config FILE   consume and insert until SIGTERM/SIGINT; serves
                               /metrics, /healthz, /readyz, GET /status, the
                               status page at / and Kafka Connect's REST API
                               (/connectors/NAME/status, config, tasks,
                               offsets) on http.listen; with http.admin: true
                               also pause, resume and stop, and moving the
                               offsets while stopped (PATCH, DELETE)
  sink check   --config FILE   validate the config, reach Kafka and ClickHouse,
                               check every route's table and columns, list the
                               fields of recent records that no column takes
                               (and the DDL schema.evolve would run), then exit
  sink report  --table DB.TABLE [--since 2h] [--split T] [--config FILE] ...
                               inserts per minute into a table, from ClickHouse's
                               query_log and part_log; before/after a split
  sink advise  --config FILE [--window 60s] [--inserts-per-minute N]
                               measure each routed topic's rate and recommend
                               fetch and batch settings, showing the arithmetic
  sink offsets show|reset --config FILE [--to WHERE | TOPIC:PARTITION=OFFSET ...]
                               the group's committed offsets, lag and pending
                               ledger; move them (dry run unless --execute)
  sink import  [--out DIR] [--brokers LIST] [--native HOST:PORT] FILE|DIR ...
                               turn Kafka Connect configs of ClickHouse's official
                               sink into sink YAML (one per connector, keeping the
                               consumer group), with what became of every key
  sink version                 print the version

Every config key can be overridden from the environment: SINK_ + the key path
in upper case with __ between levels, e.g. SINK_CLICKHOUSE__PASSWORD,
SINK_KAFKA__BROKERS=a:9092,b:9092, SINK_BATCH__MAX_LATENCY=30s; routes and
clickhouse.shards take the whole list as JSON (SINK_ROUTES='[{"topic": "a"}]').
SINK_CONFIG is the config file of run, check, advise and offsets when --config
is absent.

Each command prints its own flags with --help (e.g. sink report --help).

Exit status: 0 after a clean shutdown (all batches flushed and committed), a
passed check, a printed report or advice, or an import with no key left
unsupported; 1 on a config, connection or fatal pipeline error (or a key the
import could not carry); 2 on usage errors; 130 when a second signal
interrupts the shutdown.
`

const runUsage = `Usage: sink run --config FILE

Joins the connector's consumer group, consumes its topics and inserts their
records into ClickHouse in large batches until SIGTERM or SIGINT; then it
stops fetching, flushes every batch, commits and leaves the group, all within
shutdown_timeout (a second signal exits at once, without the flush). Offsets
are committed only below records already in ClickHouse or the dead-letter
topic or table. Logs go to stderr (log.level, log.format); the config's
warnings, deprecated keys among them, are logged at start.

With http.listen it serves /metrics, /healthz, /readyz, GET /status, the
status page at / and Kafka Connect's REST API for the connector
(/connectors/NAME, its status, config, tasks and offsets); with http.admin:
true also POST /pause and /resume, PUT /connectors/NAME/stop (flush, commit
and leave the group with the process up, STOPPED) and .../resume, and, while
stopped, PATCH and DELETE /connectors/NAME/offsets (docs/operations.md).
Every key of FILE can be overridden from the environment: SINK_ + the key path
in upper case with __ between levels, e.g. SINK_CLICKHOUSE__PASSWORD.

Exit status: 0 after a clean shutdown (all batches flushed and committed), 1 on
a config, connection or fatal pipeline error, 2 on usage errors, 130 when a
second signal interrupts the shutdown.

Flags:
`

const checkUsage = `Usage: sink check --config FILE [--allow-unfilled COLUMN,...]

Checks what sink run would need, in the order it needs it, and prints one line
per finding: the config (with its warnings and deprecated keys), the brokers
and topics, the dead-letter topic, the ClickHouse server and its features, on
a cluster every shard and replica, the schema registry, every route's table
and columns, and what exactly_once needs. It also decodes a sample of each
topic's newest records and lists the fields no column takes (with the DDL
schema.evolve would run), the columns most sampled records leave to their
default (naming the field each looked for and a field of similar name the
records have), and for a missing schema.create table the CREATE TABLE run
would execute. It runs none of them, joins no group and commits nothing. A
column that no sampled record fills fails the check, unless --allow-unfilled
names it.

Exit status: 0 when every check passed (the last line is "check: ok"), 1 on
the first problem (the one run would stop on) or a config error, 2 on usage
errors.

Flags:
`

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// commands are the subcommands, each given the arguments after its name.
var commands = map[string]func(args []string, stdout, stderr io.Writer) int{
	"run":     runCmd,
	"check":   checkCmd,
	"report":  reportCmd,
	"advise":  adviseCmd,
	"offsets": offsetsCmd,
	"import":  importCmd,
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	if c, ok := commands[cmd]; ok {
		return c(rest, stdout, stderr)
	}
	switch cmd {
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "sink", version)
		return 0
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "sink: unknown command %q\n\n%s", cmd, usage)
	return 2
}

func runCmd(args []string, _, stderr io.Writer) int {
	return daemonCmd("run", runUsage, args, stderr, run)
}

func checkCmd(args []string, stdout, stderr io.Writer) int {
	var o check.Options
	flags := func(fs *flag.FlagSet) {
		fs.Func("allow-unfilled", "accept these `COLUMN`s (or TABLE.COLUMN, comma-separated) though no sampled record fills them", func(v string) error {
			o.AllowUnfilled = append(o.AllowUnfilled, splitList(v)...)
			return nil
		})
	}
	return daemonCmd("check", checkUsage, args, stderr, func(cfg *config.Config, stderr io.Writer) int {
		ctx, cancel := context.WithTimeout(context.Background(), check.Timeout(cfg))
		defer cancel()
		if err := check.Run(ctx, cfg, openParts, stdout, o); err != nil {
			fmt.Fprintf(stderr, "sink check: %v\n", err)
			return 1
		}
		return 0
	}, flags)
}

// daemonCmd parses the flags of run or check (text is its usage, flags
// adds the command's own), loads the config and hands it to do.
func daemonCmd(cmd, text string, args []string, stderr io.Writer, do func(*config.Config, io.Writer) int, flags ...func(*flag.FlagSet)) int {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, text); fs.PrintDefaults() }
	path := fs.String("config", "", "the connector's YAML config `file` (required); when absent, $"+configEnv)
	for _, f := range flags {
		f(fs)
	}
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	*path = configPath(*path)
	if *path == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sink %s: --config FILE is required (or %s) and takes no other arguments\n", cmd, configEnv)
		return 2
	}
	cfg, err := config.Load(*path, os.Environ())
	if err != nil {
		fmt.Fprintf(stderr, "sink: %v\n", err)
		return 1
	}
	return do(cfg, stderr)
}

// configEnv names the config file when --config is absent.
const configEnv = config.EnvPrefix + "CONFIG"

// configPath is the config file: flag, the --config flag's value, or
// when it is empty the path in SINK_CONFIG.
func configPath(flag string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv(configEnv)
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// parseExit is the exit status after a command's flags failed to parse:
// 0 for --help (the usage was asked for and printed), 2 otherwise (the
// flag package has printed the problem and the usage).
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// openParts assembles the daemon for run and check (internal/assemble);
// a test wraps it to compare what the two built.
var openParts assemble.Opener = assemble.Open
