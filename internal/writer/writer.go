// Package writer is the ClickHouse side of the sink: it reads table schemas,
// finds out what the server supports (Probe), and inserts sealed batches over
// the native protocol or HTTP (clickhouse.protocol), one INSERT per batch
// with an explicit column list, retrying the identical block on retriable
// errors with exponential backoff and jitter until it succeeds, the error is
// permanent, or the process stops. A batch is never dropped here. Its only
// DDL is ALTER TABLE … ADD COLUMN, for schema evolution (ddl.go). A Writer
// is the pipeline's Sink (internal/pipeline's ports); on a cluster, a
// Cluster is (cluster.go): it splits a batch into at most one INSERT per
// shard, each retried as the identical block on the shard's replicas in
// turn, and returns only when every shard has its part.
//
// Concurrency: a Writer and a Cluster are safe for concurrent use; the
// pipeline runs up to clickhouse.max_in_flight inserts per table at once,
// and a Cluster runs one goroutine per shard part of each. A Table is
// immutable.
package writer

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/config"
	"sink/internal/backoff"
	"sink/internal/chschema"
	"sink/internal/chtable"
)

// Writer owns the connection pool to ClickHouse.
type Writer struct {
	conn     driver.Conn
	cfg      config.ClickHouse
	settings clickhouse.Settings
	name     string // connector name, part of every query_id
	dflt     defaultCache
}

// Open connects to ClickHouse (lazily: the pool dials on first use) and
// checks the server answers and accepts the credentials. A wrong password,
// an unknown user or a failed TLS handshake is one line saying so.
func Open(ctx context.Context, name string, cfg config.ClickHouse) (*Writer, error) {
	w, tlsCfg, password, err := openPool(name, cfg)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if err := w.conn.Ping(pctx); err != nil {
		w.conn.Close()
		// A ping that timed out has used pctx up: the probe gets its own.
		wctx, wcancel := context.WithTimeout(ctx, cfg.DialTimeout)
		defer wcancel()
		if wrong := wrongProtocol(wctx, cfg, tlsCfg, password, err); wrong != nil {
			return nil, wrong
		}
		return nil, openError(cfg, err)
	}
	return w, nil
}

// openPool makes the Writer and its pool without dialing: the pool connects
// on first use. A cluster's replicas are opened so, since one that is down
// at start must not keep the sink from starting.
func openPool(name string, cfg config.ClickHouse) (*Writer, *tls.Config, string, error) {
	password, err := cfg.PasswordValue()
	if err != nil {
		return nil, nil, "", fmt.Errorf("clickhouse.%w", err)
	}
	tlsCfg, err := cfg.TLS.ClientConfig()
	if err != nil {
		return nil, nil, "", fmt.Errorf("clickhouse.tls.%w", err)
	}
	opts := &clickhouse.Options{
		Protocol: clickhouse.Native,
		Addr:     cfg.Addrs,
		Auth: clickhouse.Auth{
			Database: cfg.Database,
			Username: cfg.Username,
			Password: password,
		},
		// nil: plaintext. Otherwise the secure native port, or HTTPS;
		// crypto/tls takes the server name from each address when
		// server_name is "".
		TLS:          tlsCfg,
		DialTimeout:  cfg.DialTimeout,
		ReadTimeout:  cfg.QueryTimeout,
		MaxOpenConns: chtable.InsertConns(cfg.MaxInFlight) + queryConns,
		MaxIdleConns: cfg.MaxInFlight*2 + 1,
		// The pool hands out its idle connections in turn (first in, first
		// out), so every one of them ends up holding an encode buffer as
		// large as the largest block any INSERT sent; a lifetime returns
		// that memory soon after the load that needed it.
		ConnMaxLifetime: cfg.ConnMaxLifetime,
	}
	if cfg.Protocol == config.ProtocolHTTP {
		opts.Protocol = clickhouse.HTTP
		if tlsCfg != nil && password == "" && cfg.TLS.CertFile == "" {
			// Over HTTPS without a password, clickhouse-go asks the
			// server for certificate authentication, which fails without
			// a client certificate; this user simply has no password.
			opts.HttpHeaders = map[string]string{"X-ClickHouse-SSL-Certificate-Auth": "off"}
		}
	}
	// Over HTTP too, lz4 and zstd are ClickHouse's block compression of
	// the Native format the driver sends (compress=1, decompress=1), not
	// an HTTP Content-Encoding.
	switch Compression(cfg) {
	case "lz4":
		opts.Compression = &clickhouse.Compression{Method: clickhouse.CompressionLZ4}
	case "zstd":
		opts.Compression = &clickhouse.Compression{Method: clickhouse.CompressionZSTD}
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, nil, "", fmt.Errorf("clickhouse %s: %w", strings.Join(cfg.Addrs, ","), err)
	}
	// Every call but an INSERT queues for one of the pool's queryConns
	// (gate.go): waiting for the sink's own connection is never an error.
	w := &Writer{conn: newGated(conn, queryConns), cfg: cfg, name: name}
	if len(cfg.Settings) > 0 {
		w.settings = make(clickhouse.Settings, len(cfg.Settings))
		for k, v := range cfg.Settings {
			w.settings[k] = v
		}
	}
	return w, tlsCfg, password, nil
}

// queryConns is the connections of a pool beyond the INSERTs'
// (chtable.InsertConns): every other call waits its turn for one of them.
const queryConns = 2

// Compression resolves clickhouse.compression: "auto" is none when every
// address is a loopback one (the block is copied once more through the
// kernel, not over a network, and lz4 measured 16% of the sink's client
// CPU and about a fifth of the server's for 1,000,000 rows, for 25% fewer
// bytes), lz4 otherwise; the other values are themselves.
func Compression(cfg config.ClickHouse) string {
	if cfg.Compression != "auto" {
		return cfg.Compression
	}
	for _, a := range cfg.Addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			host = a
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return "lz4"
		}
	}
	return "none"
}

// authCodes are the ClickHouse exceptions that mean the credentials were
// refused: UNKNOWN_USER, WRONG_PASSWORD, REQUIRED_PASSWORD,
// IP_ADDRESS_NOT_ALLOWED (18.16 and older) and AUTHENTICATION_FAILED (which
// newer servers send for all of them, so as not to tell which one it was).
var authCodes = map[int32]bool{192: true, 193: true, 194: true, 195: true, 516: true}

// openError says why the first ping failed, in one line: refused credentials,
// a TLS problem, or an unreachable server. The password is never part of it
// (neither the server nor the driver repeat it).
func openError(cfg config.ClickHouse, err error) error {
	addrs := strings.Join(cfg.Addrs, ",")
	var ex *clickhouse.Exception
	if errors.As(err, &ex) && authCodes[ex.Code] {
		return fmt.Errorf("clickhouse: authentication failed for user %q at %s: %s (code %d)", cfg.Username, addrs, strings.TrimSpace(ex.Message), ex.Code)
	}
	var (
		rec    tls.RecordHeaderError
		verify *tls.CertificateVerificationError
		alert  tls.AlertError
	)
	securePort := "the secure native port is tcp_port_secure, usually 9440"
	if cfg.Protocol == config.ProtocolHTTP {
		securePort = "HTTPS is https_port, usually 8443"
	}
	switch {
	// net/http turns the RecordHeaderError of a plaintext answer into an
	// error of its own that only its text identifies.
	case errors.As(err, &rec), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("clickhouse %s: TLS handshake failed: the server does not speak TLS on this port (%s)", addrs, securePort)
	case errors.As(err, &verify):
		return fmt.Errorf("clickhouse %s: TLS handshake failed: %v (check clickhouse.tls.ca_file and server_name)", addrs, verify.Err)
	case errors.As(err, &alert):
		return fmt.Errorf("clickhouse %s: TLS handshake failed: the server refused it: %w (a client certificate may be required: clickhouse.tls.cert_file, key_file)", addrs, err)
	}
	if noNativeAnswer(err) {
		return fmt.Errorf("clickhouse %s: no answer in the native protocol within %s: %w (is this ClickHouse's native port? usually 9000, or 9440 with TLS; 8123 is its HTTP port)", addrs, cfg.DialTimeout, err)
	}
	return fmt.Errorf("clickhouse %s: not reachable: %w", addrs, err)
}

// noNativeAnswer reports a ping that reached something that did not answer
// the native handshake: it timed out after connecting, or the other side
// closed or reset the connection. A refused connection or an unknown host
// is not that: nothing listens there.
func noNativeAnswer(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return false
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" && !op.Timeout() {
		return false
	}
	if strings.Contains(err.Error(), "unexpected packet") {
		return true // the server answered, in another protocol (HTTP: 'H' is 72)
	}
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || (errors.As(err, &ne) && ne.Timeout())
}

// Close closes the pool.
func (w *Writer) Close() error { return w.conn.Close() }

// Conn exposes the pool for read-only queries (check, report, the
// exactly-once offsets, the shared budget's counter): they queue for the
// pool's query connections as the Writer's own reads do.
func (w *Writer) Conn() driver.Conn { return w.conn }

// ServerVersion returns the server's version string.
func (w *Writer) ServerVersion(ctx context.Context) (string, error) {
	v, err := w.conn.ServerVersion()
	if err != nil {
		return "", err
	}
	return v.String(), nil
}

// Describe reads a table's columns from system.columns, with the value of
// each DEFAULT column's expression where the server can compute it once
// (defaults.go).
func (w *Writer) Describe(ctx context.Context, db, table string) ([]chschema.ColumnSchema, error) {
	rows, err := w.conn.Query(ctx,
		"SELECT name, type, default_kind, default_expression FROM system.columns WHERE database = ? AND table = ?", db, table)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: reading columns of %s.%s: %w", db, table, err)
	}
	defer rows.Close()
	var cols []chschema.ColumnSchema
	for rows.Next() {
		var c chschema.ColumnSchema
		if err := rows.Scan(&c.Name, &c.Type, &c.DefaultKind, &c.DefaultExpr); err != nil {
			return nil, fmt.Errorf("clickhouse: reading columns of %s.%s: %w", db, table, err)
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse: reading columns of %s.%s: %w", db, table, err)
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("clickhouse: table %s.%s %w", db, table, ErrNoTable)
	}
	rows.Close() // before the queries of fillDefaults
	if err := w.fillDefaults(ctx, cols); err != nil {
		return nil, err
	}
	// Ordinary columns are in every INSERT: refuse the table now rather
	// than at the first batch (a DEFAULT column whose name the driver
	// cannot carry gets no Default, so only a route that maps it puts it
	// in the INSERT, and InsertOnce refuses it then).
	for _, c := range cols {
		if c.DefaultKind == "" {
			if err := chtable.CheckColumnName(c.Name); err != nil {
				return nil, &chtable.UnfitError{Err: fmt.Errorf("clickhouse: table %s.%s: %w", db, table, err)}
			}
		}
	}
	return cols, nil
}

// TableEngine reads db.table's engine (system.tables.engine: MergeTree,
// View, Dictionary, …; "" when there is no such table).
func (w *Writer) TableEngine(ctx context.Context, db, table string) (string, error) {
	var engine string
	err := w.conn.QueryRow(ctx, "SELECT engine FROM system.tables WHERE database = ? AND name = ?", db, table).Scan(&engine)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("clickhouse: reading the engine of %s.%s: %w", db, table, err)
	}
	return engine, nil
}

// InsertOnce sends block as one INSERT. queryID names the attempt in
// system.query_log.
func (w *Writer) InsertOnce(ctx context.Context, t *Table, block chschema.Block, queryID string) (err error) {
	// clickhouse-go parses the server's column types itself and has panicked
	// on some (decode.Compile refuses the ones known); a panic here is a
	// permanent error of this insert, never a crash of the process.
	defer func() {
		if r := recover(); r != nil {
			err = &driverPanic{msg: fmt.Sprint(r)}
		}
	}()
	if err := t.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.QueryTimeout)
	defer cancel()
	opts := []clickhouse.QueryOption{clickhouse.WithQueryID(queryID)}
	if w.cfg.Protocol == config.ProtocolHTTP {
		// The schema the block was built for: a column the table lost
		// since is then the server's NO_SUCH_COLUMN_IN_TABLE (a schema
		// refresh), not a driver error before the INSERT is sent.
		opts = append(opts, clickhouse.WithColumnNamesAndTypes(t.NamesAndTypes()))
	}
	if extra := chtable.InsertSettings(ctx); extra != nil {
		merged := make(clickhouse.Settings, len(w.settings)+len(extra))
		for k, v := range w.settings {
			merged[k] = v
		}
		for k, v := range extra {
			merged[k] = v
		}
		opts = append(opts, clickhouse.WithSettings(merged))
	} else if w.settings != nil {
		opts = append(opts, clickhouse.WithSettings(w.settings))
	}
	ctx = clickhouse.Context(ctx, opts...)
	b, err := w.conn.PrepareBatch(ctx, t.Query())
	if err != nil {
		return err
	}
	defer b.Close()
	if n := len(block.Columns()); n != len(t.Insert) {
		return fmt.Errorf("block has %d columns, INSERT names %d", n, len(t.Insert))
	}
	if err := fill(b.Columns(), block); err != nil {
		return err
	}
	return b.Send()
}

// fill puts block's rows into the driver's columns of one INSERT (the
// columns of a fresh batch, empty). Each column is a driver column.Interface
// whose Encode writes the Native format the driver sends. Columns the block
// keeps in the driver's own layout are installed without a copy (see
// install); the driver's columns then alias the block until the batch is
// done, which is before the block is reset or refilled.
func fill(dst []column.Interface, block chschema.Block) error {
	cols := block.Columns()
	if len(dst) != len(cols) {
		return fmt.Errorf("block has %d columns, the server's INSERT header %d", len(cols), len(dst))
	}
	nb, _ := block.(nativeBlock)
	for i := range cols {
		if nb != nil && install(dst[i], nb.Native(i)) {
			continue
		}
		if _, err := dst[i].Append(block.ColumnData(i)); err != nil {
			return fmt.Errorf("column %q (%s): %w", cols[i].Name, cols[i].Type, err)
		}
	}
	return nil
}

// driverPanic is a panic inside clickhouse-go during an insert.
type driverPanic struct{ msg string }

func (e *driverPanic) Error() string { return "clickhouse-go panicked: " + e.msg }

// Insert sends block as one INSERT and retries the identical block until it
// succeeds. It returns nil on success, the error on a permanent failure, or
// the context's error when ctx is canceled (the batch then stays
// unacknowledged). onRetry, if set, is called before each wait; refresh, if
// set, is called on schema errors: the retry sends what it returns. A schema
// error that the refresh does not explain (the table has every column the
// INSERT names) or a table that no longer exists is permanent.
func (w *Writer) Insert(ctx context.Context, t *Table, block chschema.Block, batchID uint64,
	onRetry func(Attempt), refresh Refresh) error {
	_, err := insertOn(ctx, []*Writer{w}, 0, t, block, batchID, onRetry, refresh)
	return err
}

// insertOn is Insert over the replicas of one shard: it sends block to
// replicas[first] and retries the identical block until it succeeds, moving
// to the next replica after a retriable error (a replicated table drops
// the block on the other replica if the first one had committed it: the
// same block has the same checksum). Each replica is tried once at once
// before the backoff waits; with one replica every retry waits. It returns
// the replica that took the block.
func insertOn(ctx context.Context, replicas []*Writer, first int, t *Table, block chschema.Block, batchID uint64,
	onRetry func(Attempt), refresh Refresh) (int, error) {
	cfg := replicas[0].cfg
	bo := backoff.New(backoff.Policy{Initial: cfg.RetryInitial, Max: cfg.RetryMax, Jitter: backoff.EqualJitter})
	r, tried := first, 0
	for n := 1; ; n++ {
		w := replicas[r]
		qid := fmt.Sprintf("sink-%s-%d-%d-%d", w.name, time.Now().UnixNano(), batchID, n)
		err := w.InsertOnce(ctx, t, block, qid)
		if err == nil {
			return r, nil
		}
		class := chtable.Classify(ctx, err)
		at := Attempt{N: n, Class: class, Code: chtable.Code(err)}
		if len(replicas) > 1 {
			at.Replica = w.cfg.Addrs[0]
		}
		switch class {
		case Canceled:
			return r, ctx.Err()
		case Permanent:
			return r, fmt.Errorf("insert into %s (%d rows)%s: %w", t.FullName(), block.Rows(), replicaOf(at), err)
		case RefreshSchema:
			var done bool
			if t, block, done, err = refreshSchema(ctx, refresh, t, block, at, err); done {
				return r, err
			}
		case Retriable:
			if len(replicas) > 1 {
				r = (r + 1) % len(replicas)
				at.Next = replicas[r].cfg.Addrs[0]
			}
		}
		at.Err = err
		if tried++; tried < len(replicas) && class == Retriable {
			// Another replica of the shard may well be fine: try it now.
			if onRetry != nil {
				onRetry(at)
			}
			continue
		}
		tried = 0
		at.Wait = bo.Next()
		if onRetry != nil {
			onRetry(at)
		}
		if err := sleepCtx(ctx, at.Wait); err != nil {
			return r, err
		}
	}
}

// refreshSchema re-reads t's schema after err, an INSERT the server refused
// for the columns it names (attempt at). It returns the table and block to
// send next and the attempt's error (with the reason a refresh failed);
// done is true when the insert ends with that error: the table is gone, or
// it already has every column the INSERT names. Without refresh nothing
// changes.
func refreshSchema(ctx context.Context, refresh Refresh, t *Table, block chschema.Block, at Attempt, err error) (*Table, chschema.Block, bool, error) {
	if refresh == nil {
		return t, block, false, err
	}
	nt, nb, rerr := refresh(ctx, t, block)
	switch {
	case errors.Is(rerr, chtable.ErrNoTable):
		return t, block, true, fmt.Errorf("insert into %s (%d rows)%s: %w; the table no longer exists", t.FullName(), block.Rows(), replicaOf(at), err)
	case rerr != nil:
		return t, block, false, fmt.Errorf("%w (schema refresh: %v)", err, rerr)
	case nt.Query() == t.Query():
		return t, block, true, fmt.Errorf("insert into %s (%d rows)%s: %w; the table has every column the INSERT names, so re-reading its schema cannot help", t.FullName(), block.Rows(), replicaOf(at), err)
	}
	return nt, nb, false, err
}

// sleepCtx waits d, or returns ctx's error as soon as ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// replicaOf names the failed replica of at for an error message.
func replicaOf(at Attempt) string {
	if at.Replica == "" {
		return ""
	}
	return " on replica " + at.Replica
}
