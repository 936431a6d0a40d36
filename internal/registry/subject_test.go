package registry

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"sink/config"
)

func TestCheckSubject(t *testing.T) {
	for _, c := range []struct {
		strategy string
		subjects []string
		topic    string
		key      bool
		err      string // "" = allowed
	}{
		{config.SubjectAny, nil, "orders", false, ""},
		{"", nil, "orders", false, ""},
		{config.SubjectTopicName, []string{"orders-value"}, "orders", false, ""},
		{config.SubjectTopicName, []string{"payments-value", "orders-value"}, "orders", false, ""},
		{config.SubjectTopicName, []string{"orders-key"}, "orders", true, ""},
		{config.SubjectTopicName, []string{"orders-key"}, "orders", false, `schema id 7 is registered under subject "orders-key", not "orders-value" (schema_registry.subject_strategy: topic_name)`},
		{config.SubjectTopicName, []string{"orders-value"}, "orders", true, `not "orders-key"`},
		{config.SubjectTopicName, []string{"orders-value"}, "ord", false, `not "ord-value"`},
		{config.SubjectTopicName, []string{"orders.v2-value"}, "orders", false, `subject "orders.v2-value", not "orders-value"`},
		{config.SubjectTopicName, []string{"sink.test.Order"}, "orders", false, `subject "sink.test.Order"`},
		{config.SubjectTopicName, nil, "orders", false, `schema id 7 is registered under no subject, not "orders-value"`},
		{config.SubjectTopicName, []string{"a", "b", "c", "d", "e", "f", "g"}, "orders", false, `subject "a", "b", "c", "d", "e", and 2 more, not`},
		{config.SubjectTopicRecordName, []string{"orders-sink.test.Order"}, "orders", false, ""},
		{config.SubjectTopicRecordName, []string{"orders-sink.test.Key"}, "orders", true, ""},
		{config.SubjectTopicRecordName, []string{"orders-"}, "orders", false, `not "orders-"<record name> (schema_registry.subject_strategy: topic_record_name)`},
		{config.SubjectTopicRecordName, []string{"payments-sink.test.Order"}, "orders", false, `subject "payments-sink.test.Order"`},
		{config.SubjectTopicRecordName, []string{"ordersx-A"}, "orders", false, `subject "ordersx-A"`},
	} {
		s := &Schema{ID: 7, Strategy: c.strategy, Subjects: c.subjects}
		err := s.CheckSubject(c.topic, c.key)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s %v topic %s key %v: %v, want allowed", c.strategy, c.subjects, c.topic, c.key, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrBadRecord)):
			t.Errorf("%s %v topic %s key %v: %v, want a bad record with %q", c.strategy, c.subjects, c.topic, c.key, err, c.err)
		}
	}
}

// TestClientReadsSubjects: under a subject strategy the client reads an
// id's subjects with its schema (one request more, cached with it);
// under any it does not ask.
func TestClientReadsSubjects(t *testing.T) {
	ctx := context.Background()
	for _, strategy := range []string{config.SubjectAny, config.SubjectTopicName} {
		f := newFake(t)
		c, err := New(config.SchemaRegistry{URLs: []string{f.srv.URL}, SubjectStrategy: strategy}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		id, err := c.Register(ctx, "a-value", sr.TypeAvro, avroA)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := c.Register(ctx, "b-value", sr.TypeAvro, avroA); err != nil || again != id {
			t.Fatalf("the same schema under b-value: id %d, %v; want %d", again, err, id)
		}
		before := f.requests.Load()
		for range 2 {
			s, err := c.Schema(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"a-value", "b-value"}
			if strategy == config.SubjectAny {
				want = nil
			}
			if strings.Join(s.Subjects, ",") != strings.Join(want, ",") || s.Strategy != strategy && strategy != config.SubjectAny {
				t.Fatalf("%s: subjects %q strategy %q, want %q", strategy, s.Subjects, s.Strategy, want)
			}
		}
		requests := map[string]int64{config.SubjectAny: 1, config.SubjectTopicName: 2}[strategy]
		if n := f.requests.Load() - before; n != requests {
			t.Fatalf("%s: %d requests for two lookups, want %d", strategy, n, requests)
		}
	}
}
