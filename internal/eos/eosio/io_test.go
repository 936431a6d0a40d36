package eosio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/internal/chschema"
	"sink/internal/chtable"
	"sink/internal/eos"
	"sink/internal/offsets"
	"sink/internal/writer"
)

// fakeShards is a two-shard cluster: shard 1 = a1, a2; shard 2 = b1, b2.
// Route table db.ev (a Distributed table) keeps its rows in db.ev_local;
// db.plain is written on the sink's own server.
type fakeShards struct{}

func (fakeShards) Local(_ context.Context, db, table string) (writer.LocalSet, bool, error) {
	if db != "db" || table != "ev" {
		return writer.LocalSet{}, false, nil
	}
	return writer.LocalSet{Database: "db", Name: "ev_local", Shards: [][]writer.ShardReplica{
		{{Shard: 1, Addr: "a1"}, {Shard: 1, Addr: "a2"}},
		{{Shard: 2, Addr: "b1"}, {Shard: 2, Addr: "b2"}},
	}}, true, nil
}

var kafkaCols = []chschema.ColumnSchema{{Name: "_topic", Type: "String"}, {Name: "_partition", Type: "Int32"}, {Name: "_offset", Type: "Int64"}}

// fakeCheck is the per-server check over windows (server → window value;
// a server missing answers with "1000") and down (servers not reached): it
// runs eos.Require on what each server says, as check does.
func fakeCheck(windows map[string]string, down map[string]bool, seen *[]string) func(context.Context, driver.Conn, string, []*writer.Table) ([]eos.Window, error) {
	return func(_ context.Context, _ driver.Conn, where string, tables []*writer.Table) ([]eos.Window, error) {
		addr := where[strings.LastIndexByte(where, ' ')+1:]
		for _, t := range tables {
			*seen = append(*seen, where+"/"+t.FullName())
		}
		if down[addr] {
			return nil, &notReached{where: where, err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
		}
		v, ok := windows[addr]
		if !ok {
			v = "1000"
		}
		dedups := make([]chschema.TableDedup, len(tables))
		targets := make([]eos.Target, len(tables))
		out := make([]eos.Window, len(tables))
		for i, t := range tables {
			dedups[i] = chschema.TableDedup{Table: t.FullName(), Engine: "MergeTree", Setting: "non_replicated_deduplication_window", Value: v}
			targets[i] = eos.Target{Database: t.Database, Name: t.Name, Insert: t.Insert, Where: where}
			fmt.Sscan(v, &out[i].Size)
			out[i].Setting = dedups[i].Setting
		}
		if err := eos.Require(chschema.ServerInfo{DedupToken: true}, targets, dedups); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// TestWindowsEveryShard: a table written shard by shard is checked in its
// local table on every replica of every shard (the route's table on the
// sink's own server only when it is not), the smallest window counts, a
// window of 0 anywhere is refused naming the shard and replica, a replica
// not reached is passed over and named when its shard's other replica
// answered, and a shard none of whose replicas answers is refused.
func TestWindowsEveryShard(t *testing.T) {
	ev := chtable.NewTable("db", "ev", nil, kafkaCols)
	plain := chtable.NewTable("db", "plain", nil, kafkaCols)
	run := func(windows map[string]string, down map[string]bool) ([]eos.Window, []string, error) {
		var seen []string
		io := &IO{shards: fakeShards{}, check: fakeCheck(windows, down, &seen)}
		ws, err := io.Windows(context.Background(), []*writer.Table{plain, ev})
		return ws, seen, err
	}

	ws, seen, err := run(map[string]string{"a2": "300", "b1": "500"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/db.plain", "shard 1 replica a1/db.ev_local", "shard 1 replica a2/db.ev_local",
		"shard 2 replica b1/db.ev_local", "shard 2 replica b2/db.ev_local"}
	if !slices.Equal(seen, want) {
		t.Fatalf("checked %q; want %q", seen, want)
	}
	if ws[0].Size != 1000 || ws[1].Size != 300 || len(ws[1].Unchecked) != 0 {
		t.Fatalf("windows %+v; want plain 1000 and ev the smallest of its replicas, 300", ws)
	}

	_, _, err = run(map[string]string{"b2": "0"}, nil)
	if err == nil || !strings.Contains(err.Error(), "table db.ev_local on shard 2 replica b2 has non_replicated_deduplication_window = 0") {
		t.Fatalf("a replica with window 0: %v; want the refusal naming shard 2 replica b2", err)
	}

	ws, _, err = run(map[string]string{"a1": "200"}, map[string]bool{"b1": true})
	if err != nil {
		t.Fatal(err)
	}
	if ws[1].Size != 200 || !slices.Equal(ws[1].Unchecked, []string{"shard 2 replica b1"}) || len(ws[0].Unchecked) != 0 {
		t.Fatalf("windows %+v; want ev 200 with shard 2 replica b1 unchecked", ws)
	}

	_, _, err = run(nil, map[string]bool{"b1": true, "b2": true})
	if err == nil || !strings.Contains(err.Error(), "no replica of shard 2 could be reached") ||
		!strings.Contains(err.Error(), "shard 2 replica b2: not reached") || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a shard with no replica reached: %v", err)
	}

	// A refusal by a server that answered is not taken for an outage.
	io := &IO{shards: fakeShards{}, check: func(_ context.Context, _ driver.Conn, where string, _ []*writer.Table) ([]eos.Window, error) {
		return nil, named(where, errors.New("clickhouse: reading the engine of db.ev_local: code: 60, table does not exist"))
	}}
	if _, err := io.Windows(context.Background(), []*writer.Table{ev}); err == nil || !strings.HasPrefix(err.Error(), "shard 1 replica a1: ") {
		t.Fatalf("a missing local table: %v; want the error of shard 1 replica a1", err)
	}
}

// TestPresentEveryShard: after a rewind, the offsets a table written shard
// by shard holds are those any replica of any shard holds; a replica that
// cannot answer fails the check naming it; a table on the sink's own
// server is read there, by its own name.
func TestPresentEveryShard(t *testing.T) {
	tp := offsets.TP{Topic: "events", Partition: 3}
	held := map[string][]eos.Span{
		"a1": {{First: 0, Last: 1}, {First: 6, Last: 6}},
		"a2": {{First: 0, Last: 1}}, // not yet replicated: 6
		"b1": {{First: 2, Last: 4}},
		"b2": {{First: 2, Last: 4}, {First: 8, Last: 9}},
		"":   {{First: 100, Last: 100}},
	}
	var asked []string
	failing := ""
	io := &IO{shards: fakeShards{}, present: func(_ context.Context, _ driver.Conn, addr, table string, got offsets.TP, from, to int64) ([]eos.Span, error) {
		asked = append(asked, addr+" "+table)
		if got != tp || from != 0 || to != 20 {
			t.Fatalf("asked %v %d..%d", got, from, to)
		}
		if addr == failing {
			return nil, errors.New("clickhouse: checking which offsets: dial tcp: connection refused")
		}
		return held[addr], nil
	}}
	spans, err := io.Present(context.Background(), chtable.NewTable("db", "ev", nil, nil), tp, 0, 20)
	if err != nil {
		t.Fatal(err)
	}
	if want := []eos.Span{{First: 0, Last: 4}, {First: 6, Last: 6}, {First: 8, Last: 9}}; !slices.Equal(spans, want) {
		t.Fatalf("present %v; want %v", spans, want)
	}
	if want := []string{"a1 `db`.`ev_local`", "a2 `db`.`ev_local`", "b1 `db`.`ev_local`", "b2 `db`.`ev_local`"}; !slices.Equal(asked, want) {
		t.Fatalf("asked %q; want every replica's local table %q", asked, want)
	}
	failing = "b2"
	if _, err := io.Present(context.Background(), chtable.NewTable("db", "ev", nil, nil), tp, 0, 20); err == nil ||
		!strings.Contains(err.Error(), "shard 2 replica b2: clickhouse: checking which offsets") {
		t.Fatalf("a replica that cannot answer: %v; want the error naming shard 2 replica b2", err)
	}
	asked = nil
	spans, err = io.Present(context.Background(), chtable.NewTable("db", "plain", nil, nil), tp, 0, 20)
	if err != nil || !slices.Equal(spans, held[""]) || !slices.Equal(asked, []string{" `db`.`plain`"}) {
		t.Fatalf("a table on the sink's server: %v, %v, asked %q", spans, err, asked)
	}
}
