//go:build integration

package pgcdc

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// newPostgres returns a connection to a fresh database (temporary: until
// testenv has PostgreSQL).
func newPostgres(t *testing.T) *pgx.Conn {
	t.Helper()
	dsn := os.Getenv("SCRATCH_PG")
	if dsn == "" {
		t.Skip("no PostgreSQL")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn+"/postgres")
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("t%d", time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	pg, err := pgx.Connect(ctx, dsn+"/"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pg.Close(ctx)
		admin.Exec(ctx, "DROP DATABASE "+name)
		admin.Close(ctx)
	})
	return pg
}
