package testenv

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestConnectorStatusState(t *testing.T) {
	for _, tc := range []struct {
		name, status, want string
	}{
		{"running", `{"connector":{"state":"RUNNING"},"tasks":[{"id":0,"state":"RUNNING"}]}`, "RUNNING"},
		{"no task yet", `{"connector":{"state":"RUNNING"},"tasks":[]}`, "RUNNING, no task yet"},
		{"task starting", `{"connector":{"state":"RUNNING"},"tasks":[{"id":0,"state":"UNASSIGNED"}]}`, "RUNNING, task 0 UNASSIGNED"},
		{"stopped", `{"connector":{"state":"STOPPED"},"tasks":[]}`, "STOPPED"},
		{"stopping", `{"connector":{"state":"STOPPED"},"tasks":[{"id":0,"state":"RUNNING"}]}`, "STOPPED, task 0 RUNNING"},
		{"task failed", `{"connector":{"state":"RUNNING"},"tasks":[{"id":0,"state":"FAILED","trace":"org.apache.kafka.connect.errors.ConnectException: boom\n\tat x"}]}`,
			"FAILED: task 0: org.apache.kafka.connect.errors.ConnectException: boom"},
		{"connector failed", `{"connector":{"state":"FAILED","trace":"bad config\nmore"},"tasks":[]}`, "FAILED: bad config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s connectorStatus
			if err := json.Unmarshal([]byte(tc.status), &s); err != nil {
				t.Fatal(err)
			}
			if got := s.state(); got != tc.want {
				t.Errorf("state = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestConnectorConfig(t *testing.T) {
	c := &Connector{TopicPrefix: "p", Slot: "dbz_x", Publication: "dbz_x_pub",
		pg: &PG{Host: "127.0.0.1", Port: 15432, Database: "db"}}
	m := c.config(DebeziumConfig{Tables: []string{"t", "s.u"}, SchemasDisabled: true,
		Extra: map[string]string{"snapshot.mode": "no_data", "tasks.max": "2"}})
	for k, want := range map[string]string{
		"table.include.list":             "public." + MarkerTable + ",public.t,s.u",
		"key.converter.schemas.enable":   "false",
		"value.converter.schemas.enable": "false",
		"snapshot.mode":                  "no_data",
		"tasks.max":                      "2", // Extra wins
		"slot.name":                      "dbz_x",
		"publication.name":               "dbz_x_pub",
		"database.port":                  "15432",
		"topic.prefix":                   "p",
	} {
		if m[k] != want {
			t.Errorf("%s = %q, want %q", k, m[k], want)
		}
	}
	if got := c.config(DebeziumConfig{})["value.converter.schemas.enable"]; got != "true" {
		t.Errorf("schemas by default: %q, want true", got)
	}
	if got := c.Topic("t"); got != "p.public.t" {
		t.Errorf("Topic(t) = %q", got)
	}
	if got := c.Topic("s.u"); got != "p.s.u" {
		t.Errorf("Topic(s.u) = %q", got)
	}
}

func TestShortUniqueName(t *testing.T) {
	name := shortUniqueName(t, "pg", 63)
	if len(name) > 63 || !strings.HasPrefix(name, "pg_testshortuniquename_") {
		t.Errorf("%q: want at most 63 characters starting with the test's name", name)
	}
	long := shortUniqueName(t, strings.Repeat("x", 80), 63)
	if len(long) != 63 || long[len(long)-9] != '_' {
		t.Errorf("%q: want 63 characters ending in _<8 hex>", long)
	}
	if shortUniqueName(t, "pg", 63) == name {
		t.Errorf("two names are equal")
	}
}
