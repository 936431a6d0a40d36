package main

import (
	"net"
	"strings"
	"testing"
)

// TestRunFailsFastOnTakenPort: the metrics server starts before anything
// else, so a taken http.listen port fails `sink run` at once with one line
// naming it, without reaching Kafka or ClickHouse.
func TestRunFailsFastOnTakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	path := writeConfig(t, "name: x\nkafka: {brokers: [\"127.0.0.1:1\"], topics: [a]}\nroutes: [{topic: a, table: t}]\nhttp: {listen: \""+ln.Addr().String()+"\"}\n")
	code, _, errOut := sinkCmd(t, "run", "--config", path)
	want := "sink: http.listen " + ln.Addr().String() + ": bind: address already in use\n"
	if code != 1 || errOut != want || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q; want exit 1 and %q", code, errOut, want)
	}
}
