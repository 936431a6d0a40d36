package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The local stack's SASL_SSL listener (testdata/kafka/server.properties) and
// the environment variables that point elsewhere.
const (
	DefaultKafkaSASL = "127.0.0.1:9094"

	// EnvKafkaSASL is the SASL_SSL host:port instead of DefaultKafkaSASL.
	EnvKafkaSASL = "SINK_TEST_KAFKA_SASL"
	// EnvKafkaTLS is the directory with ca.pem, client.pem and client.key
	// instead of .stack/kafka/tls in the checkout (scripts/stack.sh writes
	// them there).
	EnvKafkaTLS = "SINK_TEST_KAFKA_TLS"

	// SASLUser and SASLPassword authenticate with every mechanism the
	// listener offers: PLAIN's are in server.properties, the SCRAM ones
	// are created by KafkaSASL.
	SASLUser     = "sink"
	SASLPassword = "sink-secret"
)

// SecureKafka is how to reach the SASL_SSL listener: its address, the test CA
// that signed its certificate, and the client certificate it requires.
type SecureKafka struct {
	Brokers                   []string
	CAFile, CertFile, KeyFile string
	User, Password            string
}

// TLSConfig is a crypto/tls client configuration for the listener.
func (s SecureKafka) TLSConfig(t testing.TB) *tls.Config {
	t.Helper()
	c, err := secureTLS(s)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return c
}

// KafkaSASL returns the local stack's SASL_SSL listener after making sure
// SCRAM-SHA-256 and SCRAM-SHA-512 credentials exist for SASLUser (created
// through the PLAINTEXT listener with kadm, which works on a running broker
// and is idempotent). It skips the test, or fails it under
// SINK_REQUIRE_STACK=1, when the listener does not answer a TLS handshake,
// e.g. on a stack started before the listener existed.
func KafkaSASL(t testing.TB) SecureKafka {
	t.Helper()
	brokers := Kafka(t) // the PLAINTEXT side must be up to manage users
	addr := DefaultKafkaSASL
	if v := strings.TrimSpace(os.Getenv(EnvKafkaSASL)); v != "" {
		addr = v
	}
	s := SecureKafka{Brokers: []string{addr}, User: SASLUser, Password: SASLPassword}
	dir, err := tlsDir()
	if err == nil {
		s.CAFile = filepath.Join(dir, "ca.pem")
		s.CertFile = filepath.Join(dir, "client.pem")
		s.KeyFile = filepath.Join(dir, "client.key")
		err = probe("kafka-sasl "+addr+" "+dir, func() error { return probeSASL(brokers, s) })
	}
	if err != nil {
		unavailable(t, "Kafka's SASL_SSL listener", addr,
			fmt.Errorf("%w; a stack started before the listener existed needs `make stack-up` in the checkout that started it", err))
	}
	return s
}

// tlsDir finds the stack's TLS material: EnvKafkaTLS, or .stack/kafka/tls in
// the module root above the working directory (a test's package directory),
// or, when this checkout reuses a stack another checkout started, the tls
// directory beside the running broker's server.properties.
func tlsDir() (string, error) {
	dir, err := checkoutTLSDir()
	if err == nil {
		return dir, nil
	}
	if running, ok := runningBrokerTLSDir(); ok {
		return running, nil
	}
	return "", err
}

// runningBrokerTLSDir looks for a local kafka.Kafka process started by
// scripts/stack.sh (its last argument is .stack/kafka/server.properties).
func runningBrokerTLSDir() (string, bool) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "kafka.Kafka") {
			continue
		}
		for _, arg := range strings.Split(string(b), "\x00") {
			if strings.HasSuffix(arg, filepath.Join(".stack", "kafka", "server.properties")) {
				tls := filepath.Join(filepath.Dir(arg), "tls")
				if _, err := os.Stat(filepath.Join(tls, "ca.pem")); err == nil {
					return tls, true
				}
			}
		}
	}
	return "", false
}

func checkoutTLSDir() (string, error) {
	if v := strings.TrimSpace(os.Getenv(EnvKafkaTLS)); v != "" {
		return v, nil
	}
	dir, err := checkoutRoot()
	if err != nil {
		return "", err
	}
	tls := filepath.Join(dir, ".stack", "kafka", "tls")
	if _, err := os.Stat(filepath.Join(tls, "ca.pem")); err != nil {
		return "", fmt.Errorf("no test CA in %s (set %s to the directory scripts/stack.sh wrote)", tls, EnvKafkaTLS)
	}
	return tls, nil
}

func secureTLS(s SecureKafka) (*tls.Config, error) {
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no certificate", s.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

func probeSASL(plaintext []string, s SecureKafka) error {
	c, err := secureTLS(s)
	if err != nil {
		return err
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second}, Config: c}
	conn, err := d.Dial("tcp", s.Brokers[0])
	if err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	_ = conn.Close()

	cl, err := kgo.NewClient(kgo.SeedBrokers(plaintext...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	// One mechanism per request: Kafka refuses two changes to one user's
	// credentials in a request (DUPLICATE_RESOURCE).
	adm := kadm.NewClient(cl)
	for _, m := range []kadm.ScramMechanism{kadm.ScramSha256, kadm.ScramSha512} {
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
			{User: s.User, Mechanism: m, Iterations: 4096, Password: s.Password},
		})
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("creating %s credentials for %s: %w", m, s.User, err)
		}
	}
	return nil
}
