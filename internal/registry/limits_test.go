package registry

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"sink/config"
)

// hostileRegistry answers GET /schemas/ids/1 with a schema of text and
// refs references, each answered with a small schema.
func hostileRegistry(t *testing.T, text string, refs int) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body any
		switch {
		case r.URL.Path == "/schemas/ids/1":
			var rs []map[string]any
			for i := range refs {
				rs = append(rs, map[string]any{"name": fmt.Sprintf("r%d.proto", i), "subject": fmt.Sprintf("r%d", i), "version": 1})
			}
			body = map[string]any{"schema": text, "schemaType": "PROTOBUF", "references": rs}
		case strings.HasPrefix(r.URL.Path, "/subjects/"):
			body = map[string]any{"subject": "r", "version": 1, "id": 2, "schema": "syntax = \"proto3\";", "schemaType": "PROTOBUF"}
		default:
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRegistryAnswersBounded: a schema larger than maxAnswerBytes, or
// referencing more than maxReferences schemas, is its records' bad record
// (not an outage that would hold their partitions), and the answer is not
// read past the bound.
func TestRegistryAnswersBounded(t *testing.T) {
	for _, c := range []struct {
		name string
		text string
		refs int
		want string
	}{
		{"a schema of 5 MiB", strings.Repeat("x", 5<<20), 0, "the registry's answer is larger than 4194304 bytes"},
		{"300 references", "syntax = \"proto3\";", 300, "schema id 1 references more than 256 schemas"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := newClient(t, hostileRegistry(t, c.text, c.refs), Options{})
			_, err := cl.Schema(context.Background(), 1)
			if !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Schema: %v, want a bad record with %q", err, c.want)
			}
		})
	}
	// Within the bounds: the schema and its references.
	cl := newClient(t, hostileRegistry(t, strings.Repeat("x", 1<<20), 200), Options{})
	s, err := cl.Schema(context.Background(), 1)
	if err != nil || len(s.Text) != 1<<20 || len(s.References) != 200 {
		t.Fatalf("Schema: %v, want 1 MiB of text and 200 references", err)
	}
}

// TestCappedBody reads exactly the bound and fails on the byte after it.
func TestCappedBody(t *testing.T) {
	for _, c := range []struct {
		size int
		err  error
	}{{maxAnswerBytes, nil}, {maxAnswerBytes + 1, errAnswerTooLarge}, {10, nil}} {
		b := &cappedBody{ReadCloser: nopCloser{strings.NewReader(strings.Repeat("a", c.size))}, left: maxAnswerBytes}
		n, err := readAll(b)
		if !errors.Is(err, c.err) || (c.err == nil && n != c.size) {
			t.Errorf("a body of %d bytes: read %d, %v; want %v", c.size, n, err, c.err)
		}
	}
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

func readAll(b *cappedBody) (int, error) {
	buf := make([]byte, 32<<10)
	total := 0
	for {
		n, err := b.Read(buf)
		total += n
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// TestClientOverTLS: with schema_registry.tls the client verifies the
// registry's certificate against ca_file (the transport is the sink's
// own, for the answers' bound): with the CA the registry answers, without
// it (the system's roots) its certificate is refused.
func TestClientOverTLS(t *testing.T) {
	f := newFake(t)
	srv := httptest.NewTLSServer(f.reg.Handler())
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := New(config.SchemaRegistry{URLs: []string{srv.URL}, TLS: config.TLS{Enabled: true, CAFile: ca}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Register(ctx, "t-value", sr.TypeAvro, avroA)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := c.Schema(ctx, id); err != nil || s.Text == "" {
		t.Fatalf("Schema over TLS: %v", err)
	}
	// Without ca_file the system's roots, which do not hold the test
	// server's CA: refused.
	c2, err := New(config.SchemaRegistry{URLs: []string{srv.URL}, TLS: config.TLS{Enabled: true}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Check(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Check without the CA: %v, want a certificate error", err)
	}
}
