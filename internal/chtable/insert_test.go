package chtable

import (
	"context"
	"testing"
)

// An INSERT's settings come from its context: the deduplication token of
// an exactly-once batch, the synchronous insert into a Distributed table;
// a plain context carries none.
func TestInsertSettings(t *testing.T) {
	ctx := context.Background()
	if s := InsertSettings(ctx); s != nil || DedupToken(ctx) != "" {
		t.Fatalf("plain context: settings %v, token %q", s, DedupToken(ctx))
	}
	tok := WithDedupToken(ctx, "tok-1")
	if DedupToken(tok) != "tok-1" || InsertSettings(tok)["async_insert"] != 0 {
		t.Fatalf("token context: %v", InsertSettings(tok))
	}
	sync := WithDistributedSync(ctx)
	if s := InsertSettings(sync); len(s) != 1 || s["insert_distributed_sync"] != 1 {
		t.Fatalf("distributed sync context: %v", s)
	}
}
