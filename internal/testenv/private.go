package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// PrivateClickHouse starts a ClickHouse 18.16 server of the test's own
// (Debian's clickhouse-server, the stack's config with its data in a
// temporary directory and free loopback ports) and stops it when the test
// ends. For a test that measures everything a server receives: the
// stack's servers take INSERTs from every other test running at the same
// time. It skips when clickhouse-server is not installed. About 1 s to
// start and 100 MB.
func PrivateClickHouse(t testing.TB) Server {
	t.Helper()
	requireIntegrationBuild(t)
	bin, err := exec.LookPath("clickhouse-server")
	if err != nil {
		t.Skip("testenv: clickhouse-server is not installed (scripts/stack.sh installs it)")
	}
	root, err := checkoutRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{"clickhouse/data", "clickhouse/tmp", "clickhouse/log", "clickhouse/user_files", "clickhouse/format_schemas"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tcp, http := freePort(t), freePort(t)
	for _, f := range []string{"config.xml", "users.xml"} {
		b, err := os.ReadFile(filepath.Join(root, "testdata", "clickhouse", f))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.ReplaceAll(string(b), "@STACK_DIR@", dir)
		s = strings.Replace(s, "<tcp_port>9000</tcp_port>", "<tcp_port>"+strconv.Itoa(tcp)+"</tcp_port>", 1)
		s = strings.Replace(s, "<http_port>8123</http_port>", "<http_port>"+strconv.Itoa(http)+"</http_port>", 1)
		if err := os.WriteFile(filepath.Join(dir, "clickhouse", f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "--config-file="+filepath.Join(dir, "clickhouse", "config.xml"))
	cmd.Dir = filepath.Join(dir, "clickhouse")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	s := Server{Label: "ch18private", Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp))}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		v, err := probeVersion(s.Addr)
		if err == nil {
			s.Version = v
			return s
		}
		select {
		case <-done:
			t.Fatalf("testenv: private clickhouse-server exited at start (logs in %s/clickhouse/log)", dir)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: private clickhouse-server on %s: %v", s.Addr, err)
		}
	}
}

// freePort is a loopback TCP port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// checkoutRoot is the directory holding go.mod, above the working directory.
func checkoutRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}
