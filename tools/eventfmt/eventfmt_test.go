package eventfmt

import (
	"context"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"github.com/valyala/fastjson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"sink/config"
	"sink/internal/registry"
	"sink/internal/testenv"
	"sink/tools/gen"
)

// decode reads a framed record back the way a consumer would: the schema
// id from the frame, the schema text from the registry, and the same
// libraries that wrote it (hamba/avro; protocompile + dynamicpb; fastjson).
func decode(t *testing.T, c *registry.Client, format string, rec []byte) Event {
	t.Helper()
	ctx := context.Background()
	var p fastjson.Parser
	if format == JSON {
		e, err := ParseJSON(&p, rec)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	var id int
	var payload []byte
	var err error
	if format == Protobuf {
		var idx []int
		id, idx, payload, err = registry.ParseProtobufFrame(rec, nil)
		if err == nil && (len(idx) != 1 || idx[0] != 0) {
			t.Fatalf("message indexes %v; want [0]", idx)
		}
	} else {
		id, payload, err = registry.ParseFrame(rec)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Schema(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	switch format {
	case JSONSchema:
		if s.Type != sr.TypeJSON {
			t.Fatalf("schema type %v", s.Type)
		}
		e, err := ParseJSON(&p, payload)
		if err != nil {
			t.Fatal(err)
		}
		return e
	case Avro:
		schema, err := avro.ParseWithCache(s.Text, "", &avro.SchemaCache{})
		if err != nil {
			t.Fatal(err)
		}
		var a avroEvent
		if err := avro.Unmarshal(schema, payload, &a); err != nil {
			t.Fatal(err)
		}
		cents := new(big.Rat).Mul(a.Cost, big.NewRat(100, 1))
		if !cents.IsInt() {
			t.Fatalf("cost %v has more than two decimals", a.Cost)
		}
		return Event{ID: uint64(a.ID), UserID: uint64(a.UserID), TS: a.TS.UTC(), EventType: a.EventType,
			Channel: a.Channel, CostCents: cents.Num().Int64(), Payload: a.Payload}
	case Protobuf:
		imports := map[string]string{}
		for _, r := range s.References {
			imports[r.Name] = r.Text
		}
		md, err := CompileProto("registry.proto", s.Text, imports, ProtoMessage)
		if err != nil {
			t.Fatal(err)
		}
		m := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(payload, m); err != nil {
			t.Fatal(err)
		}
		f := md.Fields()
		get := func(name string) protoreflect.Value { return m.Get(f.ByName(protoreflect.Name(name))) }
		ts := get("ts").Message()
		tf := ts.Descriptor().Fields()
		return Event{ID: get("id").Uint(), UserID: get("user_id").Uint(),
			TS:        time.Unix(ts.Get(tf.ByName("seconds")).Int(), ts.Get(tf.ByName("nanos")).Int()).UTC(),
			EventType: get("event_type").String(), Channel: get("channel").String(),
			CostCents: int64(math.Round(get("cost").Float() * 100)), Payload: get("payload").String()}
	}
	t.Fatalf("format %s", format)
	return Event{}
}

// roundTrip produces n of gen's events in every format through the
// registry at url and checks that each decodes back to the logical event of
// the JSON original.
func roundTrip(t *testing.T, url string, n int) {
	ctx := context.Background()
	c, err := registry.New(config.SchemaRegistry{URLs: []string{url}}, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	subject := testenv.UniqueName(t, "evt")
	g, err := gen.New(gen.Config{Size: 180, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	var p fastjson.Parser
	for _, format := range Formats {
		t.Run(format, func(t *testing.T) {
			enc, err := NewEncoder(format)
			if err != nil {
				t.Fatal(err)
			}
			id, err := enc.Register(ctx, c, subject+"-"+format+"-value")
			if err != nil {
				t.Fatal(err)
			}
			if (id == 0) != (format == JSON) {
				t.Fatalf("schema id %d", id)
			}
			var sizes int
			for range n {
				js, _ := g.Append(nil)
				want, err := ParseJSON(&p, js)
				if err != nil {
					t.Fatal(err)
				}
				rec, err := enc.Append(nil, js)
				if err != nil {
					t.Fatal(err)
				}
				sizes += len(rec)
				if got := decode(t, c, format, rec); got != want {
					t.Fatalf("decoded %+v\nwant    %+v\nfrom %s", got, want, js)
				}
			}
			t.Logf("%s: %d bytes per record on average", format, sizes/n)
		})
	}
}

// Against franz-go's in-memory registry: fast, and always available.
func TestRoundTripFake(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	roundTrip(t, reg.URL(), 200)
}

func TestParseJSON(t *testing.T) {
	var p fastjson.Parser
	e, err := ParseJSON(&p, []byte(`{"id":7,"user_id":42,"ts":"2024-05-01 10:00:07","event_type":"view","channel":"web","cost":123.45,"payload":"xy"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Event{ID: 7, UserID: 42, TS: time.Date(2024, 5, 1, 10, 0, 7, 0, time.UTC), EventType: "view", Channel: "web", CostCents: 12345, Payload: "xy"}
	if e != want {
		t.Fatalf("%+v", e)
	}
	for _, bad := range []string{`{`, `{"user_id":1,"ts":"2024-05-01 10:00:07","cost":1}`, `{"id":"7","user_id":1,"ts":"2024-05-01 10:00:07","cost":1}`,
		`{"id":1,"user_id":1,"ts":"May 1","cost":1}`, `{"id":1,"user_id":1,"ts":"2024-05-01 10:00:07"}`} {
		if _, err := ParseJSON(&p, []byte(bad)); err == nil {
			t.Fatalf("ParseJSON(%s) succeeded", bad)
		}
	}
	if _, err := NewEncoder("xml"); err == nil || !strings.Contains(err.Error(), `unknown format "xml"`) {
		t.Fatalf("NewEncoder(xml): %v", err)
	}
	enc, _ := NewEncoder(Avro)
	if _, err := enc.Append(nil, []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "Register first") {
		t.Fatalf("Append before Register: %v", err)
	}
}
