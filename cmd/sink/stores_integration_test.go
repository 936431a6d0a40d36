//go:build integration

package main

import (
	"fmt"
	"strings"
	"testing"

	"sink/internal/testenv"
)

// TestJavaStoresEndToEnd: on both servers, the sink reads the stack's
// SASL_SSL listener (which requires a client certificate) with a trust
// store and a key store that keytool made from the stack's test CA and
// client certificate, JKS and PKCS12, and ClickHouse's secure native port
// (a TLS proxy with a CA of its own) with a trust store of that CA; check
// passes and every record becomes a row. The store passwords come from
// the environment and a file.
func TestJavaStoresEndToEnd(t *testing.T) {
	testenv.EachServer(t, func(t *testing.T, server testenv.Server) {
		s := testenv.KafkaSASL(t)
		pki := testenv.NewPKI(t)
		proxy := testenv.CHTLSProxy(t, server, pki)
		ch := server.Conn(t)
		for _, typ := range []string{"JKS", "PKCS12"} {
			t.Run(typ, func(t *testing.T) {
				kafka := testenv.MakeJavaStores(t, typ, s.CAFile, s.CertFile, s.KeyFile, "kafka-store-pw", "")
				chStores := testenv.MakeJavaStores(t, typ, pki.CAFile, pki.CertFile, pki.KeyFile, "ch-store-pw", "")
				db := server.NewDatabase(t)
				topic := testenv.NewTopic(t, 2)
				testenv.Exec(t, ch, "CREATE TABLE "+db+".events (id UInt64) ENGINE = MergeTree ORDER BY id")
				produceJSON(t, topic, 100, func(i int) string { return fmt.Sprintf(`{"id":%d}`, i) })
				t.Setenv("SINK_KAFKA__SASL__PASSWORD", s.Password)
				t.Setenv("SINK_KAFKA__TLS__TRUSTSTORE_PASSWORD", kafka.Password)
				t.Setenv("SINK_CLICKHOUSE__TLS__TRUSTSTORE_PASSWORD", chStores.Password)
				path := writeConfig(t, fmt.Sprintf(`
name: %s
kafka:
  brokers: [%q]
  fetch_max_wait: 100ms
  tls: {enabled: true, truststore_file: %q, keystore_file: %q, keystore_type: %s, keystore_password_file: %q}
  sasl: {mechanism: SCRAM-SHA-512, username: %s}
clickhouse:
  addrs: [%q]
  database: %s
  username: %s
  password_file: %q
  tls: {enabled: true, truststore_file: %q}
batch: {max_wait: 300ms}
routes: [{topic: %q, table: events}]
http: {listen: ""}
`, "stores-"+topic, s.Brokers[0], kafka.Truststore, kafka.Keystore, typ, writePasswordFile(t, kafka.Password), s.User,
					proxy, db, testenv.CHUser, writePasswordFile(t, testenv.CHPassword), chStores.Truststore, topic))
				code, out, errOut := sinkCmd(t, "check", "--config", path)
				if code != 0 || !strings.Contains(out, "check: ok") {
					t.Fatalf("check: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
				}
				if strings.Contains(out+errOut, kafka.Password) || strings.Contains(out+errOut, chStores.Password) {
					t.Errorf("check printed a store password:\n%s\n%s", out, errOut)
				}
				r := startSink(t, path)
				waitRows(t, r, ch, db+".events", 100)
				if code := r.stop(t); code != 0 {
					t.Fatalf("sink exit %d; log:\n%s", code, r.stderr.String())
				}

				// The wrong store password is one line naming the store.
				t.Setenv("SINK_KAFKA__TLS__TRUSTSTORE_PASSWORD", "wrong")
				code, _, errOut = sinkCmd(t, "check", "--config", path)
				if code != 1 || !strings.Contains(errOut, "kafka.tls.truststore_file: "+kafka.Truststore+" ("+typ+")") {
					t.Errorf("wrong trust store password: exit %d, stderr %q", code, errOut)
				}
			})
		}
	})
}
