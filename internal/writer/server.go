package writer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sink/config"
	"sink/internal/chschema"
)

// minHTTP is the oldest ClickHouse clickhouse-go's HTTP transport works
// with. The driver adds client_protocol_version to every request's URL, a
// parameter that ClickHouse 23.2 introduced; older servers take it for a
// setting and refuse every query, the driver's first one included, with
// "Code: 115 ... Unknown setting client_protocol_version".
var minHTTP = chschema.Version{Text: "23.2", Major: 23, Minor: 2}

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
		v, ok := chschema.ParseVersion(text)
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

// Probe asks the server for its version and features. It only reads system
// tables.
func Probe(ctx context.Context, conn driver.Conn) (chschema.ServerInfo, error) {
	var info chschema.ServerInfo
	var text string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&text); err != nil {
		return info, fmt.Errorf("clickhouse: SELECT version(): %w", err)
	}
	info.Version, _ = chschema.ParseVersion(text)
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

// DedupWindows says, for each table in order, how ClickHouse deduplicates
// repeated INSERT blocks into it. It only reads system tables.
func DedupWindows(ctx context.Context, conn driver.Conn, tables []*Table) ([]chschema.TableDedup, error) {
	defaults, err := nameValues(ctx, conn, "SELECT name, value FROM system.merge_tree_settings WHERE name IN ('non_replicated_deduplication_window', 'replicated_deduplication_window')")
	if err != nil {
		return nil, err
	}
	out := make([]chschema.TableDedup, 0, len(tables))
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

// tableDedup decides which deduplication window applies to a table and its
// value: the table's own SETTINGS, else the server default in defaults
// (system.merge_tree_settings, name → value).
func tableDedup(table, engine, engineFull string, defaults map[string]string) chschema.TableDedup {
	d := chschema.TableDedup{Table: table, Engine: engine}
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
