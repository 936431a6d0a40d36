package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The test ClickHouse servers' user with a password: the same on both
// (testdata/clickhouse/users.xml, testdata/clickhouse26/users.xml).
const (
	CHUser     = "sink_secure"
	CHPassword = "sink-ch-secret"
)

// PKI is a throwaway CA and a certificate it signed, as PEM files in a
// temporary directory: what a test needs to stand up, or to trust, a TLS
// server.
type PKI struct {
	CAFile, CertFile, KeyFile string
	cert                      tls.Certificate
}

// NewPKI makes a CA and a certificate for 127.0.0.1, localhost and the given
// extra DNS names, valid for a day. ECDSA P-256 keeps it fast.
func NewPKI(t testing.TB, dnsNames ...string) PKI {
	t.Helper()
	dir := t.TempDir()
	p := PKI{
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "server.pem"),
		KeyFile:  filepath.Join(dir, "server.key"),
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("testenv: PKI: %v", err)
		}
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sink test CA " + t.Name()},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	must(err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    append([]string{"localhost"}, dnsNames...),
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	must(err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	must(err)
	write := func(path, typ string, der []byte) {
		must(os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	}
	write(p.CAFile, "CERTIFICATE", caDER)
	write(p.CertFile, "CERTIFICATE", leafDER)
	write(p.KeyFile, "PRIVATE KEY", keyDER)
	p.cert, err = tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	must(err)
	return p
}

// CHTLSProxy stands in for a ClickHouse server's secure native port: it
// accepts TLS with a certificate from pki (so clients must trust pki.CAFile)
// and relays the decrypted bytes to server s's plain native port. The local
// servers have no certificate configured, and the client side of TLS, which
// is the sink's, is what the tests exercise. It returns the proxy's address;
// it closes when the test ends.
func CHTLSProxy(t testing.TB, s Server, pki PKI) string {
	t.Helper()
	upstream := s.Addr
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pki.cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("testenv: TLS proxy: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		open = append(open, c)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed at cleanup
			}
			track(c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				// A failed handshake (untrusted CA on the client) ends here.
				if err := c.(*tls.Conn).Handshake(); err != nil {
					return
				}
				up, err := net.DialTimeout("tcp", upstream, 5*time.Second)
				if err != nil {
					return
				}
				track(up)
				defer up.Close()
				done := make(chan struct{}, 2)
				relay := func(dst, src net.Conn) {
					_, _ = io.Copy(dst, src)
					// Half-close would be tidier; closing both is
					// what a proxy restart looks like to the client.
					_ = dst.Close()
					_ = src.Close()
					done <- struct{}{}
				}
				go relay(up, c)
				go relay(c, up)
				<-done
				<-done
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range open {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
