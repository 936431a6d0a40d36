//go:build integration

package registry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"sink/config"
	"sink/internal/testenv"
)

// Against the stack's registry: each schema type registers and reads back
// by id, an unknown id is a bad record, and an outage (the connection cut by
// a proxy, the registry itself untouched) keeps cached ids working while a
// new id is retriable until the registry is back.
func TestRegistryIntegration(t *testing.T) {
	base := testenv.Registry(t)
	ctx := context.Background()
	subject := testenv.UniqueName(t, "sr") + "-value"

	direct := newClient(t, base, Options{})
	if err := direct.Check(ctx); err != nil {
		t.Fatal(err)
	}
	avro := `{"type":"record","name":"E","namespace":"sink.test","fields":[{"name":"id","type":"long"},{"name":"note","type":["null","string"],"default":null}]}`
	proto := "syntax = \"proto3\";\npackage sink.test;\n\nmessage E {\n  int64 id = 1;\n  string note = 2;\n}\n"
	jsonSchema := `{"type":"object","properties":{"id":{"type":"integer"},"note":{"type":"string"}},"required":["id"]}`
	ids := map[sr.SchemaType]int{}
	for typ, text := range map[sr.SchemaType]string{sr.TypeAvro: avro, sr.TypeProtobuf: proto, sr.TypeJSON: jsonSchema} {
		subj := strings.Replace(subject, "-value", "-"+strings.ToLower(typ.String())+"-value", 1)
		id, err := direct.Register(ctx, subj, typ, text)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		again, err := direct.Register(ctx, subj, typ, text)
		if err != nil || again != id {
			t.Fatalf("%s: registering again gave id %d, %v; want %d", typ, again, err, id)
		}
		ids[typ] = id
	}

	// Read through a proxy that the test can cut.
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr
	c, err := New(config.SchemaRegistry{URLs: []string{u.String()}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for typ, id := range ids {
		s, err := c.Schema(ctx, id)
		if err != nil {
			t.Fatalf("%s id %d: %v", typ, id, err)
		}
		if s.ID != id || s.Type != typ {
			t.Fatalf("%s id %d: got %+v", typ, id, s)
		}
		// Registries may normalize the text; the field names survive.
		if !strings.Contains(s.Text, "note") {
			t.Fatalf("%s id %d: text %q", typ, id, s.Text)
		}
	}

	// An id nobody registered: the registry's own "not found".
	const unknown = 1<<31 - 7
	if _, err := c.Schema(ctx, unknown); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("unknown id: %v; want ErrBadRecord", err)
	}

	newID, err := direct.Register(ctx, subject, sr.TypeAvro, strings.Replace(avro, `"name":"E"`, `"name":"E2"`, 1))
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	for typ, id := range ids {
		if _, err := c.Schema(ctx, id); err != nil {
			t.Fatalf("outage: cached %s id %d: %v", typ, id, err)
		}
	}
	if _, err := c.Schema(ctx, newID); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrBadRecord) {
		t.Fatalf("outage: new id %d: %v; want ErrUnavailable", newID, err)
	}
	proxy.Restore()
	if s, err := c.Schema(ctx, newID); err != nil || !strings.Contains(s.Text, "E2") {
		t.Fatalf("after the outage: new id %d: %+v, %v", newID, s, err)
	}
}

// TestSubjectsOnApicurio: the stack's registry answers an id's subjects
// (GET /schemas/ids/{id}/subjects), every subject that registered the
// same schema included, and the subject strategies judge topics by them.
func TestSubjectsOnApicurio(t *testing.T) {
	base := testenv.Registry(t)
	ctx := context.Background()
	topic := testenv.UniqueName(t, "subj")
	other := testenv.UniqueName(t, "subj_other")
	schema := `{"type":"record","name":"S","namespace":"sink.test","fields":[{"name":"id","type":"long"},{"name":"` + topic + `","type":"int"}]}`
	direct := newClient(t, base, Options{})
	id, err := direct.Register(ctx, topic+"-value", sr.TypeAvro, schema)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := direct.Register(ctx, other+"-value", sr.TypeAvro, schema); err != nil || again != id {
		t.Fatalf("the same schema under another subject: id %d, %v; want %d", again, err, id)
	}
	recordName, err := direct.Register(ctx, topic+"-sink.test.R", sr.TypeAvro, strings.Replace(schema, `"name":"S"`, `"name":"R"`, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		strategy, topic string
		id              int
		key             bool
		err             string
	}{
		{config.SubjectTopicName, topic, id, false, ""},
		{config.SubjectTopicName, other, id, false, ""},
		{config.SubjectTopicName, topic, id, true, `not "` + topic + `-key"`},
		{config.SubjectTopicName, topic + "x", id, false, `schema id ` + fmt.Sprint(id) + ` is registered under subject "`},
		{config.SubjectTopicName, topic, recordName, false, `subject "` + topic + `-sink.test.R", not "` + topic + `-value"`},
		{config.SubjectTopicRecordName, topic, recordName, false, ""},
		{config.SubjectTopicRecordName, other, recordName, false, `not "` + other + `-"<record name>`},
		{config.SubjectAny, topic + "x", id, false, ""},
	} {
		c2, err := New(config.SchemaRegistry{URLs: []string{base}, SubjectStrategy: c.strategy}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := c2.Schema(ctx, c.id)
		if err != nil {
			t.Fatalf("%s: schema id %d: %v", c.strategy, c.id, err)
		}
		err = s.CheckSubject(c.topic, c.key)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s topic %s id %d: %v, subjects %q", c.strategy, c.topic, c.id, err, s.Subjects)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s topic %s id %d: %v, want %q (subjects %q)", c.strategy, c.topic, c.id, err, c.err, s.Subjects)
		}
	}
}
