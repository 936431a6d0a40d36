//go:build integration

package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"sink/internal/testenv"
)

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
