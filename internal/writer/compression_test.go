package writer

import (
	"testing"

	"sink/config"
)

func TestCompression(t *testing.T) {
	f := func(setting string, addrs []string, want string) {
		t.Helper()
		if got := Compression(config.ClickHouse{Compression: setting, Addrs: addrs}); got != want {
			t.Fatalf("compression %q, addrs %v: got %q, want %q", setting, addrs, got, want)
		}
	}
	f("auto", []string{"127.0.0.1:9000"}, "none")
	f("auto", []string{"localhost:9000", "[::1]:9000", "127.0.0.2:19000"}, "none")
	f("auto", []string{"127.0.0.1:9000", "ch-1:9000"}, "lz4") // one remote server is enough
	f("auto", []string{"10.0.0.5:9000"}, "lz4")
	f("auto", []string{"localhost.example.com:9000"}, "lz4")
	f("lz4", []string{"127.0.0.1:9000"}, "lz4") // an explicit choice stays
	f("zstd", []string{"ch-1:9000"}, "zstd")
	f("none", []string{"ch-1:9000"}, "none")
}
