package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Defaults and the environment variables that override them.
const (
	DefaultKafka      = "127.0.0.1:9092"
	DefaultClickHouse = "127.0.0.1:9000"

	EnvKafka        = "SINK_TEST_KAFKA"
	EnvClickHouse   = "SINK_TEST_CLICKHOUSE"
	EnvRequireStack = "SINK_REQUIRE_STACK"
)

// probeTimeout bounds one reachability probe; a stack that is up answers in
// milliseconds, and a probe that hangs must not eat the test binary's timeout.
const probeTimeout = 10 * time.Second

// KafkaBrokers is the broker list the tests use: SINK_TEST_KAFKA split on commas,
// or DefaultKafka. It does not check that the brokers answer; Kafka does.
func KafkaBrokers() []string {
	v := strings.TrimSpace(os.Getenv(EnvKafka))
	if v == "" {
		return []string{DefaultKafka}
	}
	var brokers []string
	for _, b := range strings.Split(v, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	return brokers
}

// Kafka returns the brokers of the test Kafka cluster, or skips the test (fails it
// under SINK_REQUIRE_STACK=1) when they do not answer a metadata request.
func Kafka(t testing.TB) []string {
	t.Helper()
	requireIntegrationBuild(t)
	brokers := KafkaBrokers()
	addr := strings.Join(brokers, ",")
	if err := probe("kafka "+addr, func() error { return probeKafka(brokers) }); err != nil {
		unavailable(t, "Kafka", addr, err)
	}
	return brokers
}

// requireIntegrationBuild fails a test that reaches for the stack in a build
// without the integration tag. Tests that need the stack live in
// *_integration_test.go files that start with //go:build integration, so that
// `make unit` (plain go test) runs every other test without the stack, and
// `make test` (-tags integration) runs them all; a stack test in an untagged
// file would otherwise run, or be skipped, in the unit run unnoticed.
func requireIntegrationBuild(t testing.TB) {
	t.Helper()
	if !integrationBuild {
		t.Fatal("testenv: this test needs the stack but the test binary was built without -tags integration; " +
			"move it into a *_integration_test.go file starting with //go:build integration")
	}
}

// unavailable skips or, when the stack is required, fails the test.
func unavailable(t testing.TB, what, addr string, err error) {
	t.Helper()
	unavailableMsg(t, fmt.Sprintf("integration: %s not reachable at %s; run `make stack-up` (%v)", what, addr, err))
}

// unavailableMsg skips with msg or, when the stack is required, fails the test.
func unavailableMsg(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv(EnvRequireStack) == "1" {
		t.Fatal(msg)
	} else {
		t.Skip(msg)
	}
}

// Probe results, once per target and process: a test binary with hundreds of
// integration tests dials each server once, and a down server costs one timeout,
// not one per test.
var (
	probeMu     sync.Mutex
	probeResult = map[string]*probeOnce{}
	versions    sync.Map // native addr -> SELECT version()
)

type probeOnce struct {
	once sync.Once
	err  error
}

func probe(key string, fn func() error) error {
	probeMu.Lock()
	p, ok := probeResult[key]
	if !ok {
		p = &probeOnce{}
		probeResult[key] = p
	}
	probeMu.Unlock()
	p.once.Do(func() { p.err = fn() })
	return p.err
}

// dial fails fast (connection refused) before a client library starts retrying.
func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

func probeKafka(brokers []string) error { return probeKafkaBrokers(brokers, 1) }

// probeKafkaBrokers checks that some of brokers answers a metadata request that
// lists at least want brokers.
func probeKafkaBrokers(brokers []string, want int) error {
	var lastErr error
	reachable := false
	for _, b := range brokers {
		if err := dial(b); err != nil {
			lastErr = err
			continue
		}
		reachable = true
	}
	if !reachable {
		return lastErr
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	m, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return fmt.Errorf("metadata request: %w", err)
	}
	if len(m.Brokers) < want {
		return fmt.Errorf("metadata lists %d brokers, want at least %d", len(m.Brokers), want)
	}
	return nil
}

func probeClickHouse(addr string) error {
	return withProbeConn(addr, func(ctx context.Context, conn driver.Conn) error {
		var one uint8
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			return fmt.Errorf("SELECT 1: %w", err)
		}
		if one != 1 {
			return fmt.Errorf("SELECT 1 returned %d", one)
		}
		return nil
	})
}

// withProbeConn dials addr (failing fast when nothing listens), opens a native
// connection and runs fn with it under the probe timeout.
func withProbeConn(addr string, fn func(context.Context, driver.Conn) error) error {
	if err := dial(addr); err != nil {
		return err
	}
	conn, err := clickhouse.Open(chOptions(addr))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	return fn(ctx, conn)
}

// UniqueName returns prefix_<test name>_<UTC time>_<random hex>, made only of
// [a-z0-9_] so it is valid both as a Kafka topic and as a ClickHouse identifier,
// and at most 100 characters long.
func UniqueName(t testing.TB, prefix string) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testenv: random name: %v", err)
	}
	name := sanitize(t.Name())
	if len(name) > 48 {
		name = name[:48]
	}
	return fmt.Sprintf("%s_%s_%s_%s", sanitize(prefix), name,
		time.Now().UTC().Format("20060102t150405"), hex.EncodeToString(b[:]))
}

func sanitize(s string) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			sb.WriteRune(r)
		default:
			sb.WriteByte('_')
		}
	}
	return strings.Trim(sb.String(), "_")
}
