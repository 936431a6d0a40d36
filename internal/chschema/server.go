package chschema

import (
	"strconv"
	"strings"
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

// EvolveTypes is what a server offers for inferred column types
// (decode.FieldType.Column, decode.SchemaType.Column): Bool since 21.12,
// DateTime64 since 20.1, the JSON type when Probe found it, Date32 since
// 21.9, Map since 21.8 (no longer experimental).
func (i ServerInfo) EvolveTypes() ServerTypes {
	return ServerTypes{
		Bool:       i.Version.AtLeast(21, 12),
		DateTime64: i.Version.AtLeast(20, 1),
		JSON:       i.JSONType,
		Date32:     i.Version.AtLeast(21, 9),
		Map:        i.Version.AtLeast(21, 8),
	}
}

// AddIfNotExists reports whether the server takes ADD COLUMN IF NOT EXISTS
// (18.16 does not: a syntax error).
func (i ServerInfo) AddIfNotExists() bool { return i.Version.AtLeast(20, 1) }

// ServerTypes says which of the inferred types a server has.
type ServerTypes struct {
	Bool       bool // Bool (21.12+); else UInt8
	DateTime64 bool // DateTime64 (20.1+); else an RFC 3339 field is a String
	JSON       bool // the JSON type (24.8+ as its own type); else an object is a String
	// For the types of registry schemas (SchemaType.Column):
	Date32 bool // Date32 (21.9+); else Date
	Map    bool // Map(K, V) (21.8+); else a map is its JSON text (String)
}
