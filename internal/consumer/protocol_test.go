package consumer

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"sink/config"
)

// logBuf collects a logger's lines; the protocol watcher writes from its
// own goroutine.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitProtocol waits until c has learnt which protocol its group runs and
// returns it.
func waitProtocol(t *testing.T, c *Consumer) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for c.GroupProtocol() == "" {
		if time.Now().After(deadline) {
			t.Fatal("the consumer never learnt which protocol its group runs")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c.GroupProtocol()
}

// TestGroupProtocol: the sink learns which protocol its group runs once it
// has joined, and a group that does not run the protocol asked for is a
// warning that says why, also when franz-go's own fallback to classic
// would have been silent.
func TestGroupProtocol(t *testing.T) {
	without848 := kversion.Stable()
	without848.SetMaxKeyVersion(kmsg.NewPtrConsumerGroupHeartbeatRequest().Key(), -1)
	for _, tc := range []struct {
		name    string
		asked   string
		cluster []kfake.Opt
		refuse  bool // the broker advertises KIP-848 but refuses it
		want    string
		warn    string // "": no warning
	}{
		{name: "classic", asked: config.GroupClassic, want: config.GroupClassic},
		{name: "consumer", asked: config.GroupConsumer, want: config.GroupConsumer},
		{name: "broker without KIP-848", asked: config.GroupConsumer, cluster: []kfake.Opt{kfake.MaxVersions(without848)},
			want: config.GroupClassic, warn: "the brokers lack KIP-848"},
		{name: "broker refusing KIP-848", asked: config.GroupConsumer, refuse: true,
			want: config.GroupClassic, warn: "kafka.group_protocol is consumer but the group runs classic: the broker refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster, cfg := fakeWith(t, tc.cluster, "src", "dlq")
			cfg.Kafka.GroupProtocol = tc.asked
			if tc.refuse {
				cluster.ControlKey(kmsg.NewPtrConsumerGroupHeartbeatRequest().Key(), func(req kmsg.Request) (kmsg.Response, error, bool) {
					cluster.KeepControl()
					resp := req.(*kmsg.ConsumerGroupHeartbeatRequest).ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
					resp.ErrorCode = kerr.UnsupportedVersion.Code
					return resp, nil, true
				})
			}
			var logs logBuf
			c, err := New(context.Background(), cfg, zerolog.New(&logs), Hooks{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			go func() {
				for {
					f := c.Poll(context.Background())
					c.AllowRebalance()
					if f.IsClientClosed() {
						return
					}
				}
			}()
			if got := waitProtocol(t, c); got != tc.want {
				t.Fatalf("group runs %q, want %q", got, tc.want)
			}
			var warns []string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, `"level":"warn"`) {
					warns = append(warns, l)
				}
			}
			switch {
			case tc.warn == "" && len(warns) > 0:
				t.Fatalf("unexpected warnings: %v", warns)
			case tc.warn != "" && (len(warns) != 1 || !strings.Contains(warns[0], tc.warn)):
				t.Fatalf("warnings %v: want exactly one containing %q", warns, tc.warn)
			}
		})
	}
}
