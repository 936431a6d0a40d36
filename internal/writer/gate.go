package writer

import (
	"context"
	"io"
	"sync"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// gated is a server's pool as every call but an INSERT sees it: a call
// first waits for one of the pool's query connections (queryConns) in a
// queue of its own, bounded only by its context, and holds it until the
// driver has given the connection back (the rows closed, the row scanned).
// INSERTs (PrepareBatch) pass straight through: the pipeline already
// queues them for the pool's other connections (chtable.InsertConns). So
// the driver always finds a free connection at once and never fails with
// "acquire conn timeout" because the sink's own calls took them all, however
// many tables describe, refresh or read parts at once.
//
// A gated is safe for concurrent use, as the driver's pool is.
type gated struct {
	driver.Conn
	slots chan struct{}
}

func newGated(conn driver.Conn, n int) *gated {
	return &gated{Conn: conn, slots: make(chan struct{}, n)}
}

// wait takes a slot, or returns the context's error.
func (g *gated) wait(ctx context.Context) error {
	select {
	case g.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gated) done() { <-g.slots }

// once returns a func that gives the slot back the first time it is called.
func (g *gated) once() func() {
	var o sync.Once
	return func() { o.Do(g.done) }
}

func (g *gated) Query(ctx context.Context, query string, args ...any) (driver.Rows, error) {
	if err := g.wait(ctx); err != nil {
		return nil, err
	}
	rows, err := g.Conn.Query(ctx, query, args...)
	if err != nil {
		g.done()
		return nil, err
	}
	return &gatedRows{Rows: rows, done: g.once()}, nil
}

func (g *gated) QueryRow(ctx context.Context, query string, args ...any) driver.Row {
	if err := g.wait(ctx); err != nil {
		return errRow{err}
	}
	row := g.Conn.QueryRow(ctx, query, args...)
	if row.Err() != nil {
		g.done()
		return row
	}
	return &gatedRow{Row: row, done: g.once()}
}

func (g *gated) Select(ctx context.Context, dest any, query string, args ...any) error {
	if err := g.wait(ctx); err != nil {
		return err
	}
	defer g.done()
	return g.Conn.Select(ctx, dest, query, args...)
}

func (g *gated) Exec(ctx context.Context, query string, args ...any) error {
	if err := g.wait(ctx); err != nil {
		return err
	}
	defer g.done()
	return g.Conn.Exec(ctx, query, args...)
}

func (g *gated) Ping(ctx context.Context) error {
	if err := g.wait(ctx); err != nil {
		return err
	}
	defer g.done()
	return g.Conn.Ping(ctx)
}

func (g *gated) QueryFormat(ctx context.Context, format, query string, args ...any) (io.ReadCloser, error) {
	if err := g.wait(ctx); err != nil {
		return nil, err
	}
	rc, err := g.Conn.QueryFormat(ctx, format, query, args...)
	if err != nil {
		g.done()
		return nil, err
	}
	return &gatedStream{ReadCloser: rc, done: g.once()}, nil
}

func (g *gated) InsertFormat(ctx context.Context, format, query string, data io.Reader) error {
	if err := g.wait(ctx); err != nil {
		return err
	}
	defer g.done()
	return g.Conn.InsertFormat(ctx, format, query, data)
}

func (g *gated) AsyncInsert(ctx context.Context, query string, wait bool, args ...any) error {
	if err := g.wait(ctx); err != nil {
		return err
	}
	defer g.done()
	return g.Conn.AsyncInsert(ctx, query, wait, args...) //nolint:staticcheck // part of driver.Conn
}

// gatedRows gives the slot back when the rows are closed.
type gatedRows struct {
	driver.Rows
	done func()
}

func (r *gatedRows) Close() error {
	err := r.Rows.Close()
	r.done()
	return err
}

// gatedRow gives the slot back once the row is scanned: the driver has
// then read the whole answer and given the connection back.
type gatedRow struct {
	driver.Row
	done func()
}

func (r *gatedRow) Scan(dest ...any) error {
	defer r.done()
	return r.Row.Scan(dest...)
}

func (r *gatedRow) ScanStruct(dest any) error {
	defer r.done()
	return r.Row.ScanStruct(dest)
}

// errRow is the row of a query that never ran.
type errRow struct{ err error }

func (r errRow) Err() error           { return r.err }
func (r errRow) Scan(...any) error    { return r.err }
func (r errRow) ScanStruct(any) error { return r.err }

// gatedStream gives the slot back when the stream is closed.
type gatedStream struct {
	io.ReadCloser
	done func()
}

func (s *gatedStream) Close() error {
	err := s.ReadCloser.Close()
	s.done()
	return err
}
