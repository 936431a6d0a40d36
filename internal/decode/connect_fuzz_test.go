package decode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"sink/internal/decode/connect"
	"sink/internal/jsonscan"
	"sink/internal/route"
)

// connectFuzzCols read the nested test record's fields and the captured
// table's, whole and by path, into scalar and composite columns.
var connectFuzzCols = connectCols("id Nullable(Int64)", "city String", "since Nullable(Date32)", "rent Nullable(Decimal(9, 2))",
	"addr String", "addr_t Tuple(city String, since Date32, rent Decimal(9, 2), zip Tuple(code Int32))",
	"prices Array(Decimal(5, 2))", "days Array(Date32)", "rates Map(String, Decimal(5, 2))", "names Map(Int32, Nullable(String))",
	"names_s String", "stamps Array(DateTime64(3))", "dec Nullable(Decimal(12, 2))", "num Nullable(String)", "d Nullable(Date32)",
	"tm Nullable(String)", "ts Nullable(DateTime64(6))", "ba Nullable(String)", "dd Array(Decimal(5, 2))", "f8 Nullable(Float64)",
	"after_ts Nullable(String)", "v Nullable(String)")

var connectFuzzMapping = map[string]string{"city": "addr.city", "since": "addr.since", "rent": "addr.rent", "addr_t": "addr",
	"names_s": "names", "after_ts": "after.ts"}

// FuzzConnectAppend: no record panics the envelope reader; a failed
// Append leaves the block as it was; a record reads the same the first
// time, again (from the schema cache) and after another schema filled
// the cache; and format connect-json reads an envelope as json does and
// refuses anything else.
func FuzzConnectAppend(f *testing.F) {
	entries, _ := os.ReadDir(filepath.Join("testdata", "connect"))
	for _, e := range entries {
		for _, r := range readCaptures(f, e.Name()) {
			f.Add(r.Value)
		}
	}
	f.Add(connectNested)
	for _, s := range []string{
		`{"schema":null,"payload":{"v":"x"}}`,
		`{"payload":{"v":1},"schema":{"type":"struct","fields":[{"type":"int32","field":"v"}]}}`,
		`{"schema":{"type":"struct","fields":[{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"-3"},"field":"dec"}]},"payload":{"dec":"gAAAAAAAAAAAAAAAAAAAAA=="}}`,
		`{"schema":{"type":"struct","fields":[{"type":"map","keys":{"type":"array","items":{"type":"int32"}},"values":{"type":"int8"},"field":"names"}]},"payload":{"names":[[[1,2],3]]}}`,
		`{"schema":{"type":"struct","fields":[{"type":"struct","name":"io.debezium.data.VariableScaleDecimal","fields":[{"type":"int32","field":"scale"},{"type":"bytes","field":"value"}],"field":"num"}]},"payload":{"num":{"scale":2000,"value":"AQ=="}}}`,
		`{"schema":{"type":"struct","fields":[{"type":"int64","name":"org.apache.kafka.connect.data.Timestamp","field":"ts"}]},"payload":{"ts":9223372036854775807}}`,
		`{"schema":{"type":"int32"},"payload":1}`, `{"schema":{"type":"struct"},"payload":{}}`, `{"schema":null,"payload":null}`,
		`{"schema":{"type":"array","items":{"type":"int8"}},"payload":[1]}`, `{"schema":[],"payload":{}}`, `{"v":1}`, `[]`, `nul`,
	} {
		f.Add([]byte(s))
	}
	compile := func(t *testing.T, format route.Format) *Plan {
		p, err := Compile(format, connectFuzzCols, connectFuzzMapping)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		r := &kgo.Record{Topic: "t", Offset: 7, Value: value}
		fresh := compile(t, route.JSON)
		first := dbzOutcome(t, fresh, r)
		if again := dbzOutcome(t, fresh, r); again != first {
			t.Fatalf("second Append differs (schema cache):\nfirst  %s\nsecond %s", first, again)
		}
		other := compile(t, route.JSON)
		dbzOutcome(t, other, &kgo.Record{Value: connectNested})
		if got := dbzOutcome(t, other, r); got != first {
			t.Fatalf("Append after another schema differs:\nfresh %s\nwarm  %s", first, got)
		}
		strict := dbzOutcome(t, compile(t, route.ConnectJSON), r)
		var sc jsonscan.Scanner
		top, err := sc.Scan(value)
		_, _, env := sc.Envelope()
		switch {
		case err == nil && top == "object" && env:
			if strict != first {
				t.Fatalf("an envelope reads differently:\njson         %s\nconnect-json %s", first, strict)
			}
		case err == nil && top == "object":
			if !strings.Contains(strict, connect.NotEnvelope) {
				t.Fatalf("connect-json took a plain record: %s", strict)
			}
		}
	})
}
