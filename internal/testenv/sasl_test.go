package testenv_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"sink/internal/testenv"
)

// The constants here and the broker template must agree: PLAIN's users are
// listed in server.properties, and the listener is where KafkaSASL looks.
func TestSASLMatchesServerProperties(t *testing.T) {
	data, err := os.ReadFile("../../testdata/kafka/server.properties")
	if err != nil {
		t.Fatal(err)
	}
	props := string(data)
	for _, want := range []string{
		"SASL_SSL://" + testenv.DefaultKafkaSASL,
		`user_` + testenv.SASLUser + `="` + testenv.SASLPassword + `"`,
		"listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_ssl.ssl.client.auth=required",
	} {
		if !strings.Contains(props, want) {
			t.Errorf("testdata/kafka/server.properties lacks %q", want)
		}
	}
}

// TestKafkaSASL: what KafkaSASL returns works with every mechanism the
// listener offers.
func TestKafkaSASL(t *testing.T) {
	s := testenv.KafkaSASL(t)
	scr := scram.Auth{User: s.User, Pass: s.Password}
	for _, m := range []sasl.Mechanism{plain.Auth{User: s.User, Pass: s.Password}.AsMechanism(), scr.AsSha256Mechanism(), scr.AsSha512Mechanism()} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...), kgo.DialTLSConfig(s.TLSConfig(t)), kgo.SASL(m))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		cancel()
		cl.Close()
		if err != nil || len(md.Brokers) == 0 {
			t.Fatalf("%s over %s: %v, %v", m.Name(), s.Brokers[0], md.Brokers, err)
		}
	}
}
