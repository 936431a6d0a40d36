//go:build integration

package testenv

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestSweepStale leaves what a killed test binary leaves (a database from
// four hours ago with a running connector and its slot) and checks that the
// sweep removes all three, and leaves a fresh test's database alone.
func TestSweepStale(t *testing.T) {
	fresh := Postgres(t)
	old := Postgres(t)
	addr := old.addr
	// Rename the second database as if made four hours ago.
	stamp := time.Now().UTC().Add(-4 * time.Hour).Format("20060102t150405")
	oldName := "pg_sweep_" + stamp + "_0123abcd"
	admin := pgConnect(t, postgresDSN(addr, "postgres"))
	defer admin.Close(context.Background())
	ctx := context.Background()
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+old.Database+" RENAME TO "+oldName); err != nil {
		t.Fatal(err)
	}
	old.Database, old.DSN = oldName, postgresDSN(addr, oldName)
	c := Debezium(t, old, DebeziumConfig{})
	c.WaitStreaming(t)

	base := strings.TrimSuffix(envOr(EnvConnect, DefaultConnect), "/")
	sweepStale(addr, base, time.Now())

	if err := connectCall(base, http.MethodGet, "/connectors/"+url.PathEscape(c.Name), nil, nil); err == nil {
		t.Errorf("connector %s still registered after the sweep", c.Name)
	}
	var n int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", c.Slot).Scan(&n); err != nil || n != 0 {
		t.Errorf("slot %s: %d left (%v)", c.Slot, n, err)
	}
	for db, want := range map[string]int{oldName: 0, fresh.Database: 1} {
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", db).Scan(&n); err != nil || n != want {
			t.Errorf("database %s: %d, want %d (%v)", db, n, want, err)
		}
	}
}
