package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The local stack's Kafka Connect worker (`make cdc-up`): Kafka Connect 4.3
// with Debezium's PostgreSQL connector 3.6 as a plugin, on the stack's Kafka.
const (
	DefaultConnect = "http://127.0.0.1:8083"
	EnvConnect     = "SINK_TEST_CONNECT" // the worker's REST URL instead of DefaultConnect
)

// MarkerTable is the table (schema public) that Debezium adds to every
// connector's table list: WaitStreaming inserts a row into it and waits for
// that row's event.
const MarkerTable = "sink_testenv_marker"

// connectWait bounds each wait on the worker: for a connector to run, for an
// event to reach Kafka.
const connectWait = 90 * time.Second

// DebeziumConfig says what a test connector captures.
type DebeziumConfig struct {
	// TopicPrefix is Debezium's topic.prefix (also the connector's name);
	// empty: a unique one made from the test's name.
	TopicPrefix string
	// Tables to capture, "schema.table" or "table" (schema public).
	Tables []string
	// SchemasDisabled sets schemas.enable=false on the JSON converters of key
	// and value: records carry the bare payload instead of {"schema", "payload"}.
	SchemasDisabled bool
	// Extra connector settings, merged last (they override the ones above).
	Extra map[string]string
}

// Connector is a Debezium PostgreSQL connector running on the test worker,
// deleted (and its replication slot dropped) when the test ends.
type Connector struct {
	Name        string
	TopicPrefix string
	Slot        string // replication slot
	Publication string

	pg      *PG
	connect string // the worker's REST URL
}

// Debezium registers a Debezium PostgreSQL connector for pg's database and
// waits until the connector and its task run: plugin pgoutput, a slot and a
// publication of its own (publication.autocreate.mode=filtered), the JSON
// converter with schemas for key and value unless cfg disables them,
// skipped.operations=none (so TRUNCATE is captured as op "t"), cfg.Extra last.
// It skips the test (fails it under SINK_REQUIRE_STACK=1) when the worker does
// not list the connector plugin. At cleanup the connector is deleted, its slot
// dropped and its topics deleted.
func Debezium(t testing.TB, pg *PG, cfg DebeziumConfig) *Connector {
	t.Helper()
	requireIntegrationBuild(t)
	base := strings.TrimSuffix(envOr(EnvConnect, DefaultConnect), "/")
	if err := probe("connect "+base, func() error { return probeConnect(base) }); err != nil {
		unavailableMsg(t, fmt.Sprintf("integration: Kafka Connect with Debezium not reachable at %s; run `make cdc-up` (%v)", base, err))
		return nil // unreached in a test: unavailableMsg ends it
	}
	brokers := Kafka(t)
	c := &Connector{TopicPrefix: cfg.TopicPrefix, pg: pg, connect: base}
	if c.TopicPrefix == "" {
		c.TopicPrefix = UniqueName(t, "dbz")
	}
	c.Name = c.TopicPrefix
	id := randomHex(t, 8)
	c.Slot = "dbz_" + id
	c.Publication = "dbz_" + id + "_pub"

	pg.Exec(t, "CREATE TABLE IF NOT EXISTS public."+MarkerTable+" (id bigserial PRIMARY KEY, token text NOT NULL)")
	body := map[string]any{"name": c.Name, "config": c.config(cfg)}
	if err := c.call(http.MethodPost, "/connectors", body, nil); err != nil {
		t.Fatalf("testenv: register connector %s: %v", c.Name, err)
	}
	t.Cleanup(func() { c.remove(t, brokers) })
	c.waitState(t, "RUNNING")
	return c
}

// config is the connector's configuration as Debezium describes above.
func (c *Connector) config(cfg DebeziumConfig) map[string]string {
	schemas := strconv.FormatBool(!cfg.SchemasDisabled)
	tables := []string{"public." + MarkerTable}
	for _, tb := range cfg.Tables {
		tables = append(tables, qualify(tb))
	}
	m := map[string]string{
		"connector.class":                "io.debezium.connector.postgresql.PostgresConnector",
		"tasks.max":                      "1",
		"database.hostname":              c.pg.Host,
		"database.port":                  strconv.Itoa(c.pg.Port),
		"database.user":                  PostgresUser,
		"database.password":              PostgresPassword,
		"database.dbname":                c.pg.Database,
		"topic.prefix":                   c.TopicPrefix,
		"plugin.name":                    "pgoutput",
		"slot.name":                      c.Slot,
		"publication.name":               c.Publication,
		"publication.autocreate.mode":    "filtered",
		"table.include.list":             strings.Join(tables, ","),
		"skipped.operations":             "none",
		"key.converter":                  "org.apache.kafka.connect.json.JsonConverter",
		"value.converter":                "org.apache.kafka.connect.json.JsonConverter",
		"key.converter.schemas.enable":   schemas,
		"value.converter.schemas.enable": schemas,
	}
	for k, v := range cfg.Extra {
		m[k] = v
	}
	return m
}

// qualify names a table with its schema: "t" is "public.t".
func qualify(table string) string {
	if strings.Contains(table, ".") {
		return table
	}
	return "public." + table
}

// Topic is the Kafka topic of a captured table: prefix.schema.table ("t" is
// in schema public).
func (c *Connector) Topic(table string) string { return c.TopicPrefix + "." + qualify(table) }

// WaitStreaming waits until the connector has finished its snapshot and
// streams changes: it inserts a row with a random token into MarkerTable and
// waits until that row's event is in Kafka. Changes committed before the call
// are in Kafka by then too (the connector writes them in commit order).
func (c *Connector) WaitStreaming(t testing.TB) {
	t.Helper()
	token := randomHex(t, 8)
	c.pg.Exec(t, "INSERT INTO public."+MarkerTable+" (token) VALUES ($1)", token)
	cl, err := kgo.NewClient(kgo.SeedBrokers(Kafka(t)...),
		kgo.ConsumeTopics(c.Topic(MarkerTable)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// The topic appears with the connector's first marker event: look for
		// it often rather than every few seconds.
		kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	if err != nil {
		t.Fatalf("testenv: kafka client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), connectWait)
	defer cancel()
	want := []byte(`"token":"` + token + `"`)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("testenv: connector %s: the marker row's event is not in %s after %v (status: %s)",
				c.Name, c.Topic(MarkerTable), connectWait, c.statusLine())
		}
		found := false
		fs.EachRecord(func(r *kgo.Record) { found = found || bytes.Contains(r.Value, want) })
		if found {
			return
		}
	}
}

// WaitSnapshot waits until the connector's snapshot is in Kafka; it is
// WaitStreaming, since the snapshot's records precede the marker's.
func (c *Connector) WaitSnapshot(t testing.TB) {
	t.Helper()
	c.WaitStreaming(t)
}

// Stop stops the connector and its task (PUT /connectors/NAME/stop) and waits
// until the worker reports it STOPPED; its offsets and slot stay, so Resume
// goes on from where it stopped. Changes made meanwhile wait in the slot.
func (c *Connector) Stop(t testing.TB) {
	t.Helper()
	if err := c.call(http.MethodPut, "/connectors/"+url.PathEscape(c.Name)+"/stop", nil, nil); err != nil {
		t.Fatalf("testenv: stop connector %s: %v", c.Name, err)
	}
	c.waitState(t, "STOPPED")
}

// Resume starts a stopped connector again and waits until its task runs.
func (c *Connector) Resume(t testing.TB) {
	t.Helper()
	if err := c.call(http.MethodPut, "/connectors/"+url.PathEscape(c.Name)+"/resume", nil, nil); err != nil {
		t.Fatalf("testenv: resume connector %s: %v", c.Name, err)
	}
	c.waitState(t, "RUNNING")
}

// Restart restarts the connector and its task in place and waits until they run.
func (c *Connector) Restart(t testing.TB) {
	t.Helper()
	path := "/connectors/" + url.PathEscape(c.Name) + "/restart?includeTasks=true&onlyFailed=false"
	if err := c.call(http.MethodPost, path, nil, nil); err != nil {
		t.Fatalf("testenv: restart connector %s: %v", c.Name, err)
	}
	c.waitState(t, "RUNNING")
}

// connectorStatus is GET /connectors/NAME/status.
type connectorStatus struct {
	Connector struct {
		State string `json:"state"`
		Trace string `json:"trace"`
	} `json:"connector"`
	Tasks []struct {
		ID    int    `json:"id"`
		State string `json:"state"`
		Trace string `json:"trace"`
	} `json:"tasks"`
}

// state is "RUNNING" when the connector and each of its (at least one) tasks
// run, "STOPPED" when the connector is stopped and has no task, "FAILED: …"
// with the first line of the failure, else the states as the worker gives them.
func (s connectorStatus) state() string {
	if s.Connector.State == "FAILED" {
		return "FAILED: " + firstLine(s.Connector.Trace)
	}
	states := []string{s.Connector.State}
	running := s.Connector.State == "RUNNING" && len(s.Tasks) > 0
	for _, tk := range s.Tasks {
		if tk.State == "FAILED" {
			return fmt.Sprintf("FAILED: task %d: %s", tk.ID, firstLine(tk.Trace))
		}
		running = running && tk.State == "RUNNING"
		states = append(states, fmt.Sprintf("task %d %s", tk.ID, tk.State))
	}
	switch {
	case running:
		return "RUNNING"
	case s.Connector.State == "STOPPED" && len(s.Tasks) == 0:
		return "STOPPED"
	case len(s.Tasks) == 0:
		states = append(states, "no task yet")
	}
	return strings.Join(states, ", ")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// waitState polls the connector's status until it is want; a failure ends
// the test at once with the worker's reason.
func (c *Connector) waitState(t testing.TB, want string) {
	t.Helper()
	deadline := time.Now().Add(connectWait)
	for {
		got := c.statusLine()
		if got == want {
			return
		}
		if strings.HasPrefix(got, "FAILED") {
			t.Fatalf("testenv: connector %s: %s", c.Name, got)
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: connector %s: not %s after %v: %s", c.Name, want, connectWait, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// statusLine is the connector's state (see connectorStatus.state), or why it
// could not be read.
func (c *Connector) statusLine() string {
	var s connectorStatus
	if err := c.call(http.MethodGet, "/connectors/"+url.PathEscape(c.Name)+"/status", nil, &s); err != nil {
		return err.Error()
	}
	return s.state()
}

// remove deletes the connector, waits until the worker no longer knows it,
// drops its replication slot (PG's cleanup, which runs after this one, drops
// the database with its publication) and deletes its topics.
func (c *Connector) remove(t testing.TB, brokers []string) {
	path := "/connectors/" + url.PathEscape(c.Name)
	if err := c.call(http.MethodDelete, path, nil, nil); err != nil && !errors.Is(err, errNotFound) {
		t.Logf("testenv: delete connector %s: %v", c.Name, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := c.call(http.MethodGet, path, nil, nil); errors.Is(err, errNotFound) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if admin, err := pgConnectCtx(ctx, postgresDSN(c.pg.addr, "postgres")); err != nil {
		t.Logf("testenv: drop replication slot %s: %v", c.Slot, err)
	} else {
		if err := dropSlot(ctx, admin, c.Slot); err != nil {
			t.Logf("testenv: %v", err)
		}
		admin.Close(context.Background())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Logf("testenv: delete the topics of %s: %v", c.Name, err)
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Logf("testenv: delete the topics of %s: %v", c.Name, err)
		return
	}
	var ours []string
	for _, name := range topics.Names() {
		if strings.HasPrefix(name, c.TopicPrefix+".") {
			ours = append(ours, name)
		}
	}
	sort.Strings(ours)
	if len(ours) > 0 {
		if _, err := adm.DeleteTopics(ctx, ours...); err != nil {
			t.Logf("testenv: delete the topics of %s: %v", c.Name, err)
		}
	}
}

var (
	errNotFound = errors.New("not found")
	errConflict = errors.New("conflict")
)

// call sends a request to the worker's REST API with body as JSON (if not
// nil) and decodes the answer into out (if not nil). A 404 is errNotFound;
// another status of 300 or more is an error with the worker's message. A 409
// (the worker is rebalancing, as it does whenever a connector comes or goes,
// e.g. another test's) is retried for a while.
func (c *Connector) call(method, path string, body, out any) error {
	deadline := time.Now().Add(connectWait)
	for {
		err := connectCall(c.connect, method, path, body, out)
		if !errors.Is(err, errConflict) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func connectCall(base, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s %s: %w", method, path, errNotFound)
	case resp.StatusCode == http.StatusConflict:
		return fmt.Errorf("%s %s: %w: %s", method, path, errConflict, bytes.TrimSpace(b))
	case resp.StatusCode >= 300:
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	case out != nil:
		return json.Unmarshal(b, out)
	}
	return nil
}

// probeConnect checks that the worker answers and lists Debezium's
// PostgreSQL connector among its plugins.
func probeConnect(base string) error {
	var plugins []struct {
		Class string `json:"class"`
	}
	if err := connectCall(base, http.MethodGet, "/connector-plugins", nil, &plugins); err != nil {
		return err
	}
	for _, p := range plugins {
		if p.Class == "io.debezium.connector.postgresql.PostgresConnector" {
			return nil
		}
	}
	return fmt.Errorf("the worker lists no io.debezium.connector.postgresql.PostgresConnector plugin")
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("testenv: random: %v", err)
	}
	return hex.EncodeToString(b)
}
