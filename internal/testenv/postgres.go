package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The local stack's PostgreSQL 15 (`make cdc-up`, scripts/stack.sh cdc up):
// wal_level=logical, a superuser with REPLICATION that the tests and the
// Debezium connectors log in as.
const (
	DefaultPostgres  = "127.0.0.1:15432"
	EnvPostgres      = "SINK_TEST_POSTGRES" // host:port instead of DefaultPostgres
	PostgresUser     = "sink"
	PostgresPassword = "sink"
)

// PG is a fresh database on the test PostgreSQL, dropped when the test ends
// (after the replication slots on it are dropped). Exec may be called from
// several goroutines; a Conn belongs to one.
type PG struct {
	Host     string // as the tests and the Kafka Connect worker reach the server
	Port     int
	Database string
	DSN      string // postgres://sink:sink@host:port/database?sslmode=disable

	addr string // host:port
	mu   sync.Mutex
	conn *pgx.Conn // Exec's connection, opened on first use, closed at cleanup
}

// Postgres returns a fresh database on the test PostgreSQL, or skips the test
// (fails it under SINK_REQUIRE_STACK=1) when the server does not answer with
// wal_level=logical. The database is dropped when the test ends.
func Postgres(t testing.TB) *PG {
	t.Helper()
	requireIntegrationBuild(t)
	addr := envOr(EnvPostgres, DefaultPostgres)
	if err := probe("postgres "+addr, func() error { return probePostgres(addr) }); err != nil {
		unavailableMsg(t, fmt.Sprintf("integration: PostgreSQL not reachable at %s; run `make cdc-up` (%v)", addr, err))
		return nil // unreached in a test: unavailableMsg ends it
	}
	_ = probe("postgres sweep "+addr, func() error {
		sweepStale(addr, strings.TrimSuffix(envOr(EnvConnect, DefaultConnect), "/"), time.Now())
		return nil
	})
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("testenv: %s=%q: %v", EnvPostgres, addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		t.Fatalf("testenv: %s=%q: port: %v", EnvPostgres, addr, err)
	}
	pg := &PG{Host: host, Port: port, Database: shortUniqueName(t, "pg", 63), addr: addr}
	pg.DSN = postgresDSN(addr, pg.Database)

	admin := pgConnect(t, postgresDSN(addr, "postgres"))
	defer admin.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{pg.Database}.Sanitize()); err != nil {
		t.Fatalf("testenv: create database %s: %v", pg.Database, err)
	}
	t.Cleanup(func() { pg.drop(t) })
	return pg
}

// Conn returns a new connection to the test's database, closed when the test ends.
func (p *PG) Conn(t testing.TB) *pgx.Conn {
	t.Helper()
	c := pgConnect(t, p.DSN)
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// Exec runs sql (with args as $1, $2…; without args, several statements
// separated by semicolons may run at once) on the test's database and fails
// the test on an error.
func (p *PG) Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil {
		p.conn = pgConnect(t, p.DSN)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := p.conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("testenv: postgres %s: %s: %v", p.Database, sql, err)
	}
}

// drop closes Exec's connection and drops the database (see dropWith).
func (p *PG) drop(t testing.TB) {
	p.mu.Lock()
	if p.conn != nil {
		p.conn.Close(context.Background())
		p.conn = nil
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := pgConnectCtx(ctx, postgresDSN(p.addr, "postgres"))
	if err != nil {
		t.Logf("testenv: drop database %s: %v", p.Database, err)
		return
	}
	defer admin.Close(context.Background())
	p.dropWith(ctx, admin, t.Logf)
}

// dropWith drops, through admin, the replication slots on the database (a
// slot keeps its database from being dropped and holds WAL forever), ending
// whatever still streams from them, then the database itself; logf says what
// failed.
func (p *PG) dropWith(ctx context.Context, admin *pgx.Conn, logf func(string, ...any)) {
	rows, err := admin.Query(ctx, "SELECT slot_name FROM pg_replication_slots WHERE database = $1", p.Database)
	var slots []string
	if err == nil {
		slots, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		logf("testenv: list the replication slots of %s: %v", p.Database, err)
	}
	for _, s := range slots {
		if err := dropSlot(ctx, admin, s); err != nil {
			logf("testenv: %v", err)
		}
	}
	// WITH (FORCE) ends the sessions still connected to it (PostgreSQL 13+).
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{p.Database}.Sanitize()+" WITH (FORCE)"); err != nil {
		logf("testenv: drop database %s: %v", p.Database, err)
	}
}

// dropSlot drops a replication slot, ending the WAL sender that still holds
// it (a connector's task lets go of it a moment after the connector is
// deleted): first by waiting, then by terminating the sender.
func dropSlot(ctx context.Context, admin *pgx.Conn, slot string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		var pid *int32
		err := admin.QueryRow(ctx, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&pid)
		if err == pgx.ErrNoRows {
			return nil
		}
		if err != nil {
			return fmt.Errorf("replication slot %s: %w", slot, err)
		}
		if pid == nil {
			if _, err := admin.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot); err != nil {
				return fmt.Errorf("drop replication slot %s: %w", slot, err)
			}
			return nil
		}
		if time.Now().After(deadline) {
			if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", *pid); err != nil {
				return fmt.Errorf("end the WAL sender of slot %s: %w", slot, err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drop replication slot %s: %w", slot, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// shortUniqueName is UniqueName cut to at most max characters (PostgreSQL
// truncates identifiers to 63) by shortening the test name, so the time and
// the random bits at the end stay.
func shortUniqueName(t testing.TB, prefix string, max int) string {
	t.Helper()
	name := UniqueName(t, prefix)
	const tail = len("_20060102t150405_0123abcd")
	if len(name) <= max {
		return name
	}
	return strings.TrimRight(name[:max-tail], "_") + name[len(name)-tail:]
}

func postgresDSN(addr, database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(PostgresUser, PostgresPassword),
		Host:     addr,
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

func pgConnect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	c, err := pgConnectCtx(ctx, dsn)
	if err != nil {
		t.Fatalf("testenv: postgres connect: %v", err)
	}
	return c
}

// pgConnectCtx connects to dsn, failing fast when nothing listens.
func pgConnectCtx(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = 5 * time.Second
	return pgx.ConnectConfig(ctx, cfg)
}

// probePostgres checks that the sink user logs in and that the server decodes
// logical WAL, which Debezium needs.
func probePostgres(addr string) error {
	if err := dial(addr); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	c, err := pgConnectCtx(ctx, postgresDSN(addr, "postgres"))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	var level string
	if err := c.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		return fmt.Errorf("SHOW wal_level: %w", err)
	}
	if level != "logical" {
		return fmt.Errorf("wal_level is %s, Debezium needs logical", level)
	}
	return nil
}

// staleAfter is the age (by the time in its name) past which a test database
// was left by a test binary killed before its cleanup ran: no test runs that long.
const staleAfter = 3 * time.Hour

// staleDatabase matches the names Postgres gives its databases (see
// shortUniqueName), capturing the UTC time of their making.
var staleDatabase = regexp.MustCompile(`^pg_[a-z0-9_]*_([0-9]{8}t[0-9]{6})_[0-9a-f]{8}$`)

// isStale tells whether database is one that Postgres made more than
// staleAfter before now.
func isStale(database string, now time.Time) bool {
	m := staleDatabase.FindStringSubmatch(database)
	if m == nil {
		return false
	}
	made, err := time.Parse("20060102t150405", m[1])
	return err == nil && now.Sub(made) > staleAfter
}

// sweepStale removes, once per test binary, what killed test binaries left on
// the shared PostgreSQL and Kafka Connect worker: the stale databases (see
// isStale), the connectors that read them (which the worker would run
// forever) and their replication slots (which would hold WAL). Best effort:
// an error only leaves the leftovers for the next sweep.
func sweepStale(addr, connect string, now time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := pgConnectCtx(ctx, postgresDSN(addr, "postgres"))
	if err != nil {
		return
	}
	defer admin.Close(context.Background())
	rows, err := admin.Query(ctx, "SELECT datname FROM pg_database WHERE datname LIKE 'pg\\_%'")
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	stale := map[string]bool{}
	for _, n := range names {
		if isStale(n, now) {
			stale[n] = true
		}
	}
	if len(stale) == 0 {
		return
	}
	var connectors map[string]struct {
		Info struct {
			Config map[string]string `json:"config"`
		} `json:"info"`
	}
	if connectCall(connect, http.MethodGet, "/connectors?expand=info", nil, &connectors) == nil {
		for name, c := range connectors {
			if stale[c.Info.Config["database.dbname"]] {
				_ = connectCall(connect, http.MethodDelete, "/connectors/"+url.PathEscape(name), nil, nil)
			}
		}
	}
	for n := range stale {
		(&PG{Database: n, addr: addr}).dropWith(ctx, admin, func(string, ...any) {})
	}
}
