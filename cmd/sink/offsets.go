package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"sink/config"
	"sink/internal/command/groupoffsets"
)

const offsetsUsage = `Usage: sink offsets show  --config FILE
       sink offsets reset --config FILE (--to WHERE | TOPIC:PARTITION=OFFSET ...)
                          [--topic T] [--partition N] [--reload] [--yes] [--execute]

The connector's consumer group (kafka.group) and its committed offsets.

show   per partition: committed offset, log start and end, lag and, with
       delivery: exactly_once, what the commit metadata (the ledger) says is
       pending; and whether the group has active members.

reset  moves the committed offsets of the selected partitions to --to
       earliest, latest, a time (2026-12-01T10:00:00Z) or a duration back
       (-2h), or to explicit TOPIC:PARTITION=OFFSET values. It is a dry run
       unless --execute is given: it prints every partition's move and what
       it means for the tables, then every action it would take. Refused while
       the group has a member: stop every sink of the group first (SIGTERM,
       or PUT /connectors/NAME/stop on its HTTP listener: a clean stop
       flushes, commits and leaves the group; a paused sink stays a member).
       The same moves are Kafka Connect's PATCH and DELETE
       /connectors/NAME/offsets on a stopped sink's listener.
       exactly_once: on a rewind, records whose rows the table holds (by
       _offset) are skipped; --reload deletes those rows first so that they
       are loaded again, once. at_least_once: a rewind inserts the records
       again (duplicates unless the table is a ReplacingMergeTree); --reload
       deletes the rows first. A forward move skips records for good and
       needs --yes.

Flags:
`

func offsetsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "show" && args[0] != "reset") {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
			fmt.Fprint(stdout, offsetsUsage)
			return 0
		}
		fmt.Fprint(stderr, offsetsUsage)
		return 2
	}
	sub := args[0]
	f := newOffsetsFlags(sub, stderr)
	if code, ok := f.parse(args[1:]); !ok {
		return code
	}
	reset, msg := f.validate()
	if msg != "" {
		fmt.Fprintf(stderr, "sink offsets %s: %s\n", sub, msg)
		return 2
	}
	cfg, err := config.Load(*f.path, os.Environ())
	if err != nil {
		fmt.Fprintf(stderr, "sink offsets: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if sub == "show" {
		err = groupoffsets.Show(ctx, cfg, stdout)
	} else {
		err = reset.Run(ctx, cfg, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sink offsets %s: %v\n", sub, err)
		return 1
	}
	return 0
}

// offsetsFlags are the flags of `sink offsets show|reset`, and the
// explicit TOPIC:PARTITION=OFFSET values among them.
type offsetsFlags struct {
	sub                  string
	fs                   *flag.FlagSet
	path, to, topic      *string
	partition            *int
	reload, yes, execute *bool
	explicit             []string
}

func newOffsetsFlags(sub string, stderr io.Writer) *offsetsFlags {
	fs := flag.NewFlagSet("offsets "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, offsetsUsage); fs.PrintDefaults() }
	return &offsetsFlags{
		sub:       sub,
		fs:        fs,
		path:      fs.String("config", "", "the connector's YAML config (required); when absent, $SINK_CONFIG"),
		to:        fs.String("to", "", "reset: earliest, latest, an RFC 3339 time or a duration back (-2h)"),
		topic:     fs.String("topic", "", "reset: only this topic's partitions"),
		partition: fs.Int("partition", -1, "reset: only this partition (with --topic)"),
		reload:    fs.Bool("reload", false, "reset: delete the rows at the new offset or later from the tables first, so the records load again exactly once"),
		yes:       fs.Bool("yes", false, "reset: confirm a forward move (the records passed over are never inserted)"),
		execute:   fs.Bool("execute", false, "reset: do it (without: a dry run that prints what it would do)"),
	}
}

// parse reads the flags, with explicit TOPIC:PARTITION=OFFSET values
// standing among them; !ok with the exit status when they do not parse.
func (f *offsetsFlags) parse(rest []string) (code int, ok bool) {
	for {
		if err := f.fs.Parse(rest); err != nil {
			return parseExit(err), false
		}
		if f.fs.NArg() == 0 {
			return 0, true
		}
		f.explicit = append(f.explicit, f.fs.Arg(0))
		rest = f.fs.Args()[1:]
	}
}

// resetFlags says whether a flag or value only reset takes was given.
func (f *offsetsFlags) resetFlags() bool {
	return len(f.explicit) > 0 || *f.to != "" || *f.reload || *f.yes || *f.execute || *f.topic != "" || *f.partition >= 0
}

// validate checks the flags' combination and returns the reset they ask
// for, or a usage error's message.
func (f *offsetsFlags) validate() (groupoffsets.Reset, string) {
	r := groupoffsets.Reset{Topic: *f.topic, Partition: int32(*f.partition), Reload: *f.reload, Yes: *f.yes, Execute: *f.execute}
	if *f.path = configPath(*f.path); *f.path == "" {
		return r, "--config FILE is required (or SINK_CONFIG)"
	}
	if f.sub == "show" {
		if f.resetFlags() {
			return r, "takes only --config"
		}
		return r, ""
	}
	var err error
	switch {
	case (*f.to == "") == (len(f.explicit) == 0):
		return r, "give either --to or TOPIC:PARTITION=OFFSET values"
	case *f.to != "":
		r.Target, err = groupoffsets.ParseTo(*f.to, time.Now())
	default:
		r.Target.Explicit, err = groupoffsets.ParseExplicit(f.explicit)
	}
	if err != nil {
		return r, err.Error()
	}
	if *f.partition >= 0 && *f.topic == "" {
		return r, "--partition needs --topic"
	}
	return r, ""
}
