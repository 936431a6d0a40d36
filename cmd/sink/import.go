package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"sink/internal/command/connectimport"
)

const importUsage = `Usage: sink import [--out DIR | --stdout] [--brokers HOST:PORT,...] [--native HOST:PORT]
                   [--delivery at_least_once|exactly_once] [--sample N] [--force] FILE|DIR ...

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

A connector that names no value.converter gets the Connect worker's, by
default JsonConverter with schemas.enable=true ({"schema", "payload"}
envelopes). When the brokers are known (--brokers, or the connector's
consumer.override.bootstrap.servers) the import reads the newest --sample
records of each of its topics (with the YAML's kafka settings, passwords
from the environment) and picks the format by what they are: connect-json
for envelopes, json for plain JSON or a mix (json reads both); the summary
says what it found. Otherwise it writes format json, which reads both.

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
	var im connectimport.Import
	fs.StringVar(&im.OutDir, "out", ".", "write each connector's YAML into this `directory`")
	fs.BoolVar(&im.Stdout, "stdout", false, "write the YAML to standard output (the tables go to standard error)")
	brokers := fs.String("brokers", "", "the Connect worker's bootstrap.servers, `HOST:PORT,...` (a connector config does not name them)")
	fs.StringVar(&im.NativeAddr, "native", "", "talk ClickHouse's native protocol at `HOST:PORT` instead of HTTP at the connector's hostname:port")
	fs.StringVar(&im.Delivery, "delivery", "", "at_least_once or exactly_once instead of what exactlyOnce says")
	fs.BoolVar(&im.Force, "force", false, "overwrite existing YAML files")
	fs.IntVar(&im.SampleSize, "sample", 20, "records to read from each topic of a connector that names no value.converter, to see what the worker's converter writes (with --brokers; 0: read none)")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "sink import: name at least one connector file or directory")
		return 2
	}
	if im.SampleSize < 0 {
		fmt.Fprintf(stderr, "sink import: --sample %d: want 0 or more records\n", im.SampleSize)
		return 2
	}
	if im.Delivery != "" && im.Delivery != "at_least_once" && im.Delivery != "exactly_once" {
		fmt.Fprintf(stderr, "sink import: --delivery %q: want at_least_once or exactly_once\n", im.Delivery)
		return 2
	}
	for _, b := range strings.Split(*brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			im.Brokers = append(im.Brokers, b)
		}
	}
	im.Records = connectimport.KafkaRecords
	return im.Run(fs.Args(), stdout, stderr)
}
