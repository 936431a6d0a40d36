package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sink/internal/command/connectimport"
)

const importUsage = `Usage: sink import [--out DIR | --stdout] [--brokers HOST:PORT,...] [--native HOST:PORT]
                   [--delivery at_least_once|exactly_once] [--force] FILE|DIR ...

Turns the config of a Kafka Connect connector running ClickHouse's official
sink (com.clickhouse.kafka.connect.ClickHouseSinkConnector) into a sink YAML,
one per connector. Each input is the JSON body Connect's REST API takes
({"name": ..., "config": {...}}), the bare config object, or a .properties
file; a directory stands for its *.json and *.properties files.

The YAML keeps the connector's consumer group (connect-NAME, or its
consumer.override.group.id), so the sink starts where the connector stopped.
For every key of the input a table says what became of it: carried (to which
key), not needed here (why) or NOT SUPPORTED (why); the table is printed and
written at the top of the YAML. Passwords are never written: the table names
the environment variable to set instead.

Writes DIR/NAME.yaml (NAME: the connector's name) and refuses to overwrite an
existing file without --force. Exit status: 0 when every key was carried or is
not needed, 1 when a key is not supported (the YAML is written all the same)
or an input could not be converted, 2 on usage errors. Then: sink check
--config NAME.yaml, and docs/migrating.md for the switch.

Flags:
`

func importCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, importUsage); fs.PrintDefaults() }
	out := fs.String("out", ".", "write each connector's YAML into this `directory`")
	toStdout := fs.Bool("stdout", false, "write the YAML to standard output (the tables go to standard error)")
	brokers := fs.String("brokers", "", "the Connect worker's bootstrap.servers, `HOST:PORT,...` (a connector config does not name them)")
	native := fs.String("native", "", "talk ClickHouse's native protocol at `HOST:PORT` instead of HTTP at the connector's hostname:port")
	delivery := fs.String("delivery", "", "at_least_once or exactly_once instead of what exactlyOnce says")
	force := fs.Bool("force", false, "overwrite existing YAML files")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "sink import: name at least one connector file or directory")
		return 2
	}
	if *delivery != "" && *delivery != "at_least_once" && *delivery != "exactly_once" {
		fmt.Fprintf(stderr, "sink import: --delivery %q: want at_least_once or exactly_once\n", *delivery)
		return 2
	}
	opts := connectimport.Options{NativeAddr: *native, Delivery: *delivery}
	for _, b := range strings.Split(*brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			opts.Brokers = append(opts.Brokers, b)
		}
	}
	files, err := importInputs(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "sink import: %v\n", err)
		return 1
	}
	tables := stdout
	if *toStdout {
		tables = stderr
	}
	status := 0
	written := map[string]string{} // output path -> input, so two inputs never write one file
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintf(stderr, "sink import: %v\n", err)
			status = 1
			continue
		}
		c, err := connectimport.Parse(file, data)
		if err != nil {
			fmt.Fprintf(stderr, "sink import: %v\n", err)
			status = 1
			continue
		}
		r, err := connectimport.Convert(c, opts)
		if err != nil {
			fmt.Fprintf(stderr, "sink import: %s: %v\n", file, err)
			status = 1
			continue
		}
		dest := "standard output"
		if *toStdout {
			if _, err := stdout.Write(r.YAML); err != nil {
				fmt.Fprintf(stderr, "sink import: %v\n", err)
				return 1
			}
		} else {
			dest = filepath.Join(*out, r.Name+".yaml")
			if prev, ok := written[dest]; ok {
				fmt.Fprintf(stderr, "sink import: %s: connector %q would overwrite %s, written from %s\n", file, c.Name, dest, prev)
				status = 1
				continue
			}
			if err := writeNew(dest, r.YAML, *force); err != nil {
				fmt.Fprintf(stderr, "sink import: %s: %v\n", file, err)
				status = 1
				continue
			}
			written[dest] = file
		}
		fmt.Fprintf(tables, "== %s: connector %q -> %s (group %s)\n", file, c.Name, dest, groupOf(r.YAML))
		connectimport.PrintFates(tables, r.Fates)
		for _, n := range r.Notes {
			fmt.Fprintf(tables, "note: %s\n", n)
		}
		if u := r.Unsupported(); len(u) > 0 {
			keys := make([]string, len(u))
			for i, f := range u {
				keys[i] = f.Key
			}
			fmt.Fprintf(tables, "NOT SUPPORTED: %s\n", strings.Join(keys, ", "))
			status = 1
		}
		fmt.Fprintln(tables)
	}
	return status
}

// importInputs expands directories into their *.json and *.properties
// files, in name order.
func importInputs(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, a)
			continue
		}
		var found []string
		for _, pat := range []string{"*.json", "*.properties"} {
			m, err := filepath.Glob(filepath.Join(a, pat))
			if err != nil {
				return nil, err
			}
			found = append(found, m...)
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no *.json or *.properties file in it", a)
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	return files, nil
}

// writeNew writes a file, refusing to replace one unless force.
func writeNew(path string, data []byte, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists (--force replaces it)", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// groupOf reads kafka.group back from the YAML, for the summary line.
func groupOf(y []byte) string {
	for _, line := range bytes.Split(y, []byte("\n")) {
		if g, ok := bytes.CutPrefix(line, []byte("  group: ")); ok {
			return string(g)
		}
	}
	return "?"
}
