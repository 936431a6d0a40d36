package connectimport

import (
	"reflect"
	"testing"
)

func TestParseForms(t *testing.T) {
	for _, tc := range []struct {
		name, file, in string
		wantName       string
		want           map[string]string
		fails          bool
	}{
		{"REST body", "x.json", `{"name":"a","config":{"topics":"t","tasks.max":2,"ssl":true,"x":null}}`, "a",
			map[string]string{"topics": "t", "tasks.max": "2", "ssl": "true", "x": ""}, false},
		{"bare config names itself", "x.json", `{"name":"b","topics":"t"}`, "b", map[string]string{"name": "b", "topics": "t"}, false},
		{"bare config named by file", "dir/c.json", `{"topics":"t"}`, "c", map[string]string{"topics": "t"}, false},
		{"properties", "p.properties", "# c\n! c\nname = p\ntopics:t1,\\\n   t2\nport 8123\nregex=a\\\\.b\nu=\\u00e9\n", "p",
			map[string]string{"name": "p", "topics": "t1,t2", "port": "8123", "regex": `a\.b`, "u": "é"}, false},
		{"nested object value", "x.json", `{"config":{"a":{"b":1}}}`, "", nil, true},
		{"config not an object", "x.json", `{"config":"x"}`, "", nil, true},
		{"two values", "x.json", `{"a":"b"} {}`, "", nil, true},
		{"empty", "x.properties", "  \n", "", nil, true},
		{"bad escape", "x.properties", `a=\u12`, "", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(tc.file, []byte(tc.in))
			if tc.fails {
				if err == nil {
					t.Fatalf("parsed: %+v", c)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Name != tc.wantName || !reflect.DeepEqual(c.Config, tc.want) {
				t.Errorf("got %q %v, want %q %v", c.Name, c.Config, tc.wantName, tc.want)
			}
		})
	}
}

// FuzzParse: no input makes Parse or Convert panic, and a connector that
// converts yields a YAML the sink loads (Convert checks it) whose fate
// table has every key.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"name":"a","config":{"connector.class":"` + SinkClass + `","topics":"t","hostname":"h"}}`))
	f.Add([]byte("connector.class=" + SinkClass + "\ntopics=a.b,c\ntransforms=r\ntransforms.r.type=org.apache.kafka.connect.transforms.RegexRouter\ntransforms.r.regex=(.*)\ntransforms.r.replacement=x_$1\n"))
	f.Add([]byte("connector.class=" + SinkClass + "\ntopics.regex=[\ntopic2TableMap=a=b=c,,=\n"))
	f.Add([]byte(`{"config":{"connector.class":"` + SinkClass + `","topics":"t","debeziumCDCEnabled":"true","transforms":"u","transforms.u.type":"io.debezium.transforms.ExtractNewRecordState"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.properties", data)
		if err != nil {
			return
		}
		r, err := Convert(c, Options{})
		if err != nil {
			return
		}
		if len(r.Fates) != len(c.Config) {
			t.Fatalf("%d fates for %d keys", len(r.Fates), len(c.Config))
		}
	})
}
