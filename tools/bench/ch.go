package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// chHTTP runs control queries (DDL, counts, system tables) over
// ClickHouse's HTTP interface. Nothing measured goes through it except the
// naive inserter's INSERTs.
type chHTTP struct {
	base string // http://host:port/
	hc   *http.Client
}

func newCH(base string) *chHTTP {
	return &chHTTP{base: strings.TrimSuffix(base, "/") + "/", hc: &http.Client{Timeout: 60 * time.Second}}
}

// query sends q and returns the body, TabSeparated, with the trailing
// newline removed. The format is asked for: a user profile's
// default_format need not be TabSeparated.
func (c *chHTTP) query(ctx context.Context, q string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"?default_format=TabSeparated", strings.NewReader(q))
	if err != nil {
		return "", err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("clickhouse %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("clickhouse %s: %w", c.base, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("clickhouse: %s: %s", oneLine(q), oneLine(string(body)))
	}
	return strings.TrimSuffix(string(body), "\n"), nil
}

func (c *chHTTP) exec(ctx context.Context, q string) error {
	_, err := c.query(ctx, q)
	return err
}

// int64 runs a query that returns one number.
func (c *chHTTP) int64(ctx context.Context, q string) (int64, error) {
	s, err := c.query(ctx, q)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("clickhouse: %s: answer %q is not a number", oneLine(q), s)
	}
	return n, nil
}

// insertURL is the URL that inserts a request body in format into table.
func (c *chHTTP) insertURL(table, format string) string {
	return c.base + "?query=" + url.QueryEscape("INSERT INTO "+table+" FORMAT "+format)
}

// exceptionOf is the server's own message in a query error ("Code: N.
// DB::Exception: …"), without the statement that chHTTP.query puts first.
func exceptionOf(err error) string {
	s := err.Error()
	if i := strings.Index(s, "Code: "); i >= 0 {
		s = s[i:]
	}
	return oneLine(s)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
