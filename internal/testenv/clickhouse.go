package testenv

import (
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// chOptions are the connection options for a test server: user default without
// a password, as testdata/clickhouse/users.xml and testdata/clickhouse26/users.xml
// configure it.
func chOptions(addr string) *clickhouse.Options {
	return &clickhouse.Options{
		Protocol:    clickhouse.Native,
		Addr:        []string{addr},
		Auth:        clickhouse.Auth{Database: "default", Username: "default"},
		DialTimeout: 5 * time.Second,
	}
}
