package testenv

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// JavaStores are a trust store and a key store made by Java's keytool, as
// a Kafka Connect user holds them.
type JavaStores struct {
	Truststore, Keystore string
	Type                 string // JKS or PKCS12
	Password             string // of both stores
	// KeyPassword is the JKS key entry's own password ("" : the store's).
	KeyPassword string
}

// MakeJavaStores makes, with keytool, a trust store of type typ (JKS or
// PKCS12) holding the PEM CA of caFile, and a key store holding the PEM
// certificate and key of certFile and keyFile (openssl packs them in a
// PKCS12 file first, which keytool converts: keytool cannot read a PEM
// key). keyPassword, for JKS, gives the key entry its own password. It
// skips the test (fails it under SINK_REQUIRE_STACK=1) without keytool or
// openssl.
func MakeJavaStores(t testing.TB, typ, caFile, certFile, keyFile, password, keyPassword string) JavaStores {
	t.Helper()
	for _, tool := range []string{"keytool", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailableMsg(t, "testenv: "+tool+" is needed to make Java key stores: "+err.Error())
		}
	}
	dir := t.TempDir()
	ext := map[string]string{"JKS": ".jks", "PKCS12": ".p12"}[typ]
	s := JavaStores{Truststore: filepath.Join(dir, "truststore"+ext), Keystore: filepath.Join(dir, "keystore"+ext),
		Type: typ, Password: password, KeyPassword: keyPassword}
	run(t, "keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", caFile,
		"-keystore", s.Truststore, "-storetype", typ, "-storepass", password)
	packed := filepath.Join(dir, "client-openssl.p12")
	run(t, "openssl", "pkcs12", "-export", "-in", certFile, "-inkey", keyFile, "-certfile", caFile,
		"-name", "client", "-out", packed, "-passout", "pass:"+password)
	args := []string{"-importkeystore", "-noprompt", "-srckeystore", packed, "-srcstoretype", "PKCS12", "-srcstorepass", password,
		"-destkeystore", s.Keystore, "-deststoretype", typ, "-deststorepass", password}
	if keyPassword != "" {
		args = append(args, "-srcalias", "client", "-destalias", "client", "-srckeypass", password, "-destkeypass", keyPassword)
	}
	run(t, "keytool", args...)
	return s
}

// run runs a command, failing the test with its output when it fails.
func run(t testing.TB, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("testenv: %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}
