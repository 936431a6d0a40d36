package consumer

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// classed is an error that knows its dead-letter class, as
// tables.Classified's errors do.
type classed struct {
	error
	class string
}

func (c classed) DeadLetterClass() string { return c.class }

// TestConnectHeaders: every copy carries DeadLetterHeaders, in order after
// the record's own; the Connect headers say where the record came from,
// which connector and stage, and the exception of the class of error.
func TestConnectHeaders(t *testing.T) {
	rec := &kgo.Record{Topic: "src", Partition: 3, Offset: 41, Timestamp: time.UnixMilli(5),
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t")}}}
	for _, tc := range []struct {
		class, stage, exception string
	}{
		{"malformed", "VALUE_CONVERTER", "org.apache.kafka.connect.errors.DataException"},
		{"decoder", "VALUE_CONVERTER", "org.apache.kafka.connect.errors.DataException"},
		{"column", "TASK_PUT", "org.apache.kafka.connect.errors.DataException"},
		{"unrouted", "TASK_PUT", "org.apache.kafka.connect.errors.ConnectException"},
		{"", "TASK_PUT", "org.apache.kafka.connect.errors.ConnectException"},
	} {
		var cause error = errors.New("bad value")
		if tc.class != "" {
			cause = fmt.Errorf("wrapped: %w", classed{cause, tc.class})
		}
		out := DLQRecord("dlq", "orders-sink", rec, cause, 0, false)
		var keys []string
		hs := map[string]string{}
		for _, h := range out.Headers {
			keys = append(keys, h.Key)
			hs[h.Key] = string(h.Value)
		}
		if want := append([]string{"trace"}, DeadLetterHeaders...); fmt.Sprint(keys) != fmt.Sprint(want) {
			t.Fatalf("class %q: headers %v; want %v", tc.class, keys, want)
		}
		msg := cause.Error()
		want := map[string]string{ConnectTopic: "src", ConnectPartition: "3", ConnectOffset: "41", ConnectConnector: "orders-sink",
			ConnectTaskID: "0", ConnectStage: tc.stage, ConnectExceptionClass: tc.exception, ConnectExceptionMsg: msg,
			ConnectStacktrace: tc.exception + ": " + msg, HeaderError: msg}
		for k, v := range want {
			if hs[k] != v {
				t.Errorf("class %q: %s = %q; want %q", tc.class, k, hs[k], v)
			}
		}
	}
}
