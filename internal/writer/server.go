package writer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/config"
)

// Version is a ClickHouse server version, as SELECT version() gives it
// ("26.9.2.1"); Major and Minor are its first two numbers.
type Version struct {
	Text         string
	Major, Minor int
}

// ParseVersion reads the first two numbers of a version string; ok is false
// when there are none ("", "dev").
func ParseVersion(s string) (v Version, ok bool) {
	v.Text = strings.TrimSpace(s)
	parts := strings.SplitN(v.Text, ".", 3)
	if len(parts) < 2 {
		return v, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil || major < 0 || minor < 0 {
		return v, false
	}
	v.Major, v.Minor = major, minor
	return v, true
}

// AtLeast reports whether v is major.minor or newer.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

func (v Version) String() string { return v.Text }

// minHTTP is the oldest ClickHouse clickhouse-go's HTTP transport works
// with. The driver adds client_protocol_version to every request's URL, a
// parameter that ClickHouse 23.2 introduced; older servers take it for a
// setting and refuse every query, the driver's first one included, with
// "Code: 115 ... Unknown setting client_protocol_version".
var minHTTP = Version{Text: "23.2", Major: 23, Minor: 2}

// wrongProtocol is called when the first ping failed with pingErr. It asks
// each address for its version with a plain HTTP request, which every
// server version answers on its HTTP port, and returns a one-line error
// when that explains the failure: over HTTP, a server older than minHTTP;
// over the native protocol, an address that is an HTTP port. It returns nil
// otherwise (the ping's own error then says what went wrong).
func wrongProtocol(ctx context.Context, cfg config.ClickHouse, tlsCfg *tls.Config, password string, pingErr error) error {
	var ex *clickhouse.Exception
	if cfg.Protocol == config.ProtocolNative && errors.As(pingErr, &ex) {
		return nil // the server answered the native protocol
	}
	for _, addr := range cfg.Addrs {
		text, err := httpVersion(ctx, addr, cfg.Username, password, tlsCfg)
		if err != nil {
			continue
		}
		v, ok := ParseVersion(text)
		switch {
		case !ok:
		case cfg.Protocol == config.ProtocolNative:
			return fmt.Errorf("clickhouse %s: this is the HTTP port of ClickHouse %s; set clickhouse.protocol: http, or use its native port (tcp_port, usually 9000)", addr, v)
		case !v.AtLeast(minHTTP.Major, minHTTP.Minor):
			return fmt.Errorf("clickhouse: protocol http needs ClickHouse %s or newer; %s runs %s; use protocol: native", minHTTP, addr, v)
		}
	}
	return nil
}

// httpVersion runs SELECT version() over ClickHouse's HTTP interface
// without clickhouse-go, with HTTP basic authentication. The format is
// explicit: a server may default to another one (clickhouse-local: CSV).
func httpVersion(ctx context.Context, addr, user, password string, tlsCfg *tls.Config) (string, error) {
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: addr, Path: "/", RawQuery: url.Values{"query": {"SELECT version() FORMAT TabSeparated"}}.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	req.SetBasicAuth(user, password)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return strings.TrimSpace(string(body)), nil
}

// ServerInfo is what the server offers that matters to the sink, as
// `sink check` reports it. Probe fills it.
type ServerInfo struct {
	Version Version
	// DedupToken: the insert_deduplication_token setting exists, so an
	// INSERT can carry its own deduplication key.
	DedupToken bool
	// AsyncInsert: the async_insert setting exists; AsyncInsertOn: it is
	// on for this user (then the server may buffer the sink's INSERTs).
	AsyncInsert, AsyncInsertOn bool
	// JSONType: the JSON data type exists as its own type, not as an
	// alias of the old experimental Object('json').
	JSONType bool
	// IsDeleted: ReplacingMergeTree takes a second parameter, the
	// is_deleted column (23.2+). Told by the version: there is no system
	// table that lists engine parameters.
	IsDeleted bool
}

// TableDedup says whether ClickHouse deduplicates repeated INSERT blocks into
// a table, and by which setting.
type TableDedup struct {
	Table  string // db.table
	Engine string // as system.tables.engine names it
	// Setting is non_replicated_deduplication_window for a plain
	// MergeTree-family table, replicated_deduplication_window for a
	// Replicated* one, "" for other engines (no block deduplication).
	Setting string
	// Value is the setting's value: from the table's SETTINGS clause when
	// it sets it (FromTable), else the server's MergeTree default. "" when
	// the server has no such setting (non_replicated_deduplication_window
	// is missing on old servers).
	Value     string
	FromTable bool
}

// Probe asks the server for its version and features. It only reads system
// tables.
func Probe(ctx context.Context, conn driver.Conn) (ServerInfo, error) {
	var info ServerInfo
	var text string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&text); err != nil {
		return info, fmt.Errorf("clickhouse: SELECT version(): %w", err)
	}
	info.Version, _ = ParseVersion(text)
	info.IsDeleted = info.Version.AtLeast(23, 2)

	settings, err := nameValues(ctx, conn, "SELECT name, value FROM system.settings WHERE name IN ('insert_deduplication_token', 'async_insert')")
	if err != nil {
		return info, err
	}
	_, info.DedupToken = settings["insert_deduplication_token"]
	async, ok := settings["async_insert"]
	info.AsyncInsert, info.AsyncInsertOn = ok, ok && async != "0"

	types, err := nameValues(ctx, conn, "SELECT name, alias_to FROM system.data_type_families WHERE name = 'JSON'")
	if err != nil {
		return info, err
	}
	alias, json := types["JSON"]
	info.JSONType = json && !strings.EqualFold(alias, "Object")
	return info, nil
}

// Lines describes the server for `sink check`, one feature a line.
func (i ServerInfo) Lines() []string {
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	async := yes(i.AsyncInsert)
	if i.AsyncInsert {
		async += map[bool]string{true: ", on for this user", false: ", off for this user"}[i.AsyncInsertOn]
	}
	return []string{
		"server version " + i.Version.Text,
		"insert deduplication tokens (setting insert_deduplication_token): " + yes(i.DedupToken),
		"async inserts (setting async_insert): " + async,
		"JSON type: " + yes(i.JSONType),
		"ReplacingMergeTree is_deleted column (ClickHouse 23.2+): " + yes(i.IsDeleted),
	}
}

// DedupWindows says, for each table in order, how ClickHouse deduplicates
// repeated INSERT blocks into it. It only reads system tables.
func DedupWindows(ctx context.Context, conn driver.Conn, tables []*Table) ([]TableDedup, error) {
	defaults, err := nameValues(ctx, conn, "SELECT name, value FROM system.merge_tree_settings WHERE name IN ('non_replicated_deduplication_window', 'replicated_deduplication_window')")
	if err != nil {
		return nil, err
	}
	out := make([]TableDedup, 0, len(tables))
	for _, t := range tables {
		var engine, engineFull string
		err := conn.QueryRow(ctx, "SELECT engine, engine_full FROM system.tables WHERE database = ? AND name = ?", t.Database, t.Name).
			Scan(&engine, &engineFull)
		if err != nil {
			return nil, fmt.Errorf("clickhouse: reading the engine of %s: %w", t.FullName(), err)
		}
		out = append(out, tableDedup(t.FullName(), engine, engineFull, defaults))
	}
	return out, nil
}

// String describes the table's deduplication for `sink check`.
func (d TableDedup) String() string {
	head := "table " + d.Table + " (" + d.Engine + "): "
	switch {
	case d.Setting == "":
		return head + "INSERT blocks are not deduplicated (not a MergeTree-family table)"
	case d.Value == "":
		return head + "INSERT blocks are not deduplicated (this server has no " + d.Setting + ")"
	}
	from := "server default"
	if d.FromTable {
		from = "table setting"
	}
	head += d.Setting + " = " + d.Value + " (" + from + "): "
	if d.Value == "0" {
		return head + "INSERT blocks are not deduplicated"
	}
	return head + "a repeat of one of the last " + d.Value + " INSERT blocks is dropped"
}

// tableDedup decides which deduplication window applies to a table and its
// value: the table's own SETTINGS, else the server default in defaults
// (system.merge_tree_settings, name → value).
func tableDedup(table, engine, engineFull string, defaults map[string]string) TableDedup {
	d := TableDedup{Table: table, Engine: engine}
	switch {
	case strings.HasPrefix(engine, "Replicated") && strings.HasSuffix(engine, "MergeTree"):
		d.Setting = "replicated_deduplication_window"
	case strings.HasSuffix(engine, "MergeTree"):
		d.Setting = "non_replicated_deduplication_window"
	default:
		return d
	}
	if v, ok := EngineSetting(engineFull, d.Setting); ok {
		d.Value, d.FromTable = v, true
	} else {
		d.Value = defaults[d.Setting]
	}
	return d
}

// EngineSetting finds a setting in the SETTINGS clause of a table's
// engine_full ("MergeTree ORDER BY id SETTINGS a = 1, b = 'x, y'") and
// returns its value as written, quotes removed.
func EngineSetting(engineFull, name string) (string, bool) {
	i := lastKeyword(engineFull, "SETTINGS")
	if i < 0 {
		return "", false
	}
	for _, item := range splitSettings(engineFull[i+len("SETTINGS"):]) {
		k, v, ok := strings.Cut(item, "=")
		if ok && strings.TrimSpace(k) == name {
			v = strings.TrimSpace(v)
			if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
				v = v[1 : len(v)-1]
			}
			return v, true
		}
	}
	return "", false
}

// lastKeyword is the index of the last whole-word, unquoted occurrence of kw.
func lastKeyword(s, kw string) int {
	last := -1
	unquoted(s, func(i int) {
		if strings.HasPrefix(s[i:], kw) && (i == 0 || !isWordByte(s[i-1])) && (i+len(kw) == len(s) || !isWordByte(s[i+len(kw)])) {
			last = i
		}
	})
	return last
}

// splitSettings splits "a = 1, b = 'x, y'" at the commas outside quotes.
func splitSettings(s string) []string {
	var out []string
	start := 0
	unquoted(s, func(i int) {
		if s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	})
	return append(out, s[start:])
}

// unquoted calls visit with the index of every byte of s outside
// 'single-quoted' strings (in which \ escapes the next byte).
func unquoted(s string, visit func(i int)) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '\'':
			quoted = !quoted
		case !quoted:
			visit(i)
		}
	}
}

func isWordByte(c byte) bool {
	return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// nameValues runs a two-column query (name, value) into a map.
func nameValues(ctx context.Context, conn driver.Conn, query string) (map[string]string, error) {
	rows, err := conn.Query(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %s: %w", query, err)
	}
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("clickhouse: %s: %w", query, err)
		}
		m[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse: %s: %w", query, err)
	}
	return m, nil
}
