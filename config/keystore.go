package config

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/pavlo-v-chernykh/keystore-go/v4"
	"software.sslmate.com/src/go-pkcs12"
)

// Stores is the Java way of giving TLS its certificates, beside the PEM
// files of TLS: a trust store of the CAs that sign the servers'
// certificates (what ca_file is), and a key store holding the client's
// key and certificate chain (what cert_file and key_file are), each a JKS
// or PKCS12 file as Kafka Connect's ssl.truststore.* and ssl.keystore.*
// name them. JKS is read by keystore-go, PKCS12 by go-pkcs12. The
// passwords come from the environment (SINK_KAFKA__TLS__TRUSTSTORE_PASSWORD
// …) or a file, never from the config file.
type Stores struct {
	TruststoreFile string `koanf:"truststore_file" print:"omitzero"`
	// TruststoreType is JKS or PKCS12; "" tells them by the file's first
	// bytes.
	TruststoreType         string `koanf:"truststore_type" print:"omitzero"`
	TruststorePassword     Secret `koanf:"truststore_password" print:"omitzero"`
	TruststorePasswordFile string `koanf:"truststore_password_file" print:"omitzero"`
	KeystoreFile           string `koanf:"keystore_file" print:"omitzero"`
	KeystoreType           string `koanf:"keystore_type" print:"omitzero"`
	KeystorePassword       Secret `koanf:"keystore_password" print:"omitzero"`
	KeystorePasswordFile   string `koanf:"keystore_password_file" print:"omitzero"`
	// KeyPassword is the password of the key entry in a JKS key store
	// (Kafka's ssl.key.password), when it is not the store's.
	KeyPassword     Secret `koanf:"key_password" print:"omitzero"`
	KeyPasswordFile string `koanf:"key_password_file" print:"omitzero"`
}

// Store types.
const (
	StoreJKS    = "JKS"
	StorePKCS12 = "PKCS12"
)

// jksMagic starts every JKS file.
var jksMagic = []byte{0xFE, 0xED, 0xFE, 0xED}

// storeType is the type of the store in data: typ as written (upper
// case), or when "" what the first bytes say.
func storeType(typ string, data []byte) (string, error) {
	switch t := strings.ToUpper(strings.TrimSpace(typ)); t {
	case StoreJKS, StorePKCS12:
		return t, nil
	case "":
	default:
		return "", fmt.Errorf("%q is not JKS or PKCS12", typ)
	}
	switch {
	case bytes.HasPrefix(data, jksMagic):
		return StoreJKS, nil
	case len(data) > 0 && data[0] == 0x30: // a DER SEQUENCE: PKCS12
		return StorePKCS12, nil
	}
	return "", errors.New("neither JKS nor PKCS12 (a PEM file goes in ca_file, cert_file and key_file)")
}

// set reports whether any store key is set.
func (s Stores) set() bool { return s != Stores{} }

// trustPool reads the trust store's certificates into a pool.
func (s Stores) trustPool() (*x509.CertPool, error) {
	data, typ, pw, err := readStore(s.TruststoreFile, s.TruststoreType, s.TruststorePassword, s.TruststorePasswordFile)
	if err != nil {
		return nil, fmt.Errorf("truststore_%v", err)
	}
	var certs []*x509.Certificate
	if typ == StoreJKS {
		certs, err = jksTrusted(data, pw)
	} else {
		certs, err = pkcs12.DecodeTrustStore(data, pw)
	}
	if err == nil && len(certs) == 0 {
		err = errors.New("holds no trusted certificate")
	}
	if err != nil {
		return nil, fmt.Errorf("truststore_file: %s (%s): %v", s.TruststoreFile, typ, err)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// clientCert reads the key store's key and certificate chain.
func (s Stores) clientCert() (*tls.Certificate, error) {
	data, typ, pw, err := readStore(s.KeystoreFile, s.KeystoreType, s.KeystorePassword, s.KeystorePasswordFile)
	if err != nil {
		return nil, fmt.Errorf("keystore_%v", err)
	}
	var cert *tls.Certificate
	if typ == StoreJKS {
		keyPW := pw
		if s.KeyPassword != "" || s.KeyPasswordFile != "" {
			if keyPW, err = passwordValue(s.KeyPassword, s.KeyPasswordFile); err != nil {
				return nil, fmt.Errorf("key_%v", err)
			}
		}
		cert, err = jksKey(data, pw, keyPW)
	} else {
		cert, err = pkcs12Key(data, pw)
	}
	if err != nil {
		return nil, fmt.Errorf("keystore_file: %s (%s): %v", s.KeystoreFile, typ, err)
	}
	return cert, nil
}

// readStore reads a store file, its type and its password; an error names
// the key without the store's prefix ("file: …", "type: …").
func readStore(file, typ string, pw Secret, pwFile string) (data []byte, t, password string, err error) {
	if pw != "" && pwFile != "" {
		return nil, "", "", errors.New("password_file: set together with the password; set only one")
	}
	if password, err = passwordValue(pw, pwFile); err != nil {
		return nil, "", "", err
	}
	if data, err = os.ReadFile(file); err != nil {
		return nil, "", "", fmt.Errorf("file: %v", err)
	}
	if t, err = storeType(typ, data); err != nil {
		return nil, "", "", fmt.Errorf("type: %s: %v", file, err)
	}
	return data, t, password, nil
}

// jksTrusted is a JKS store's trusted certificates.
func jksTrusted(data []byte, pw string) ([]*x509.Certificate, error) {
	ks := keystore.New()
	if err := ks.Load(bytes.NewReader(data), []byte(pw)); err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for _, alias := range ks.Aliases() {
		if !ks.IsTrustedCertificateEntry(alias) {
			continue
		}
		e, err := ks.GetTrustedCertificateEntry(alias)
		if err != nil {
			return nil, err
		}
		c, err := x509.ParseCertificate(e.Certificate.Content)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %v", alias, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// jksKey is the one private key entry of a JKS store, with its chain.
func jksKey(data []byte, storePW, keyPW string) (*tls.Certificate, error) {
	ks := keystore.New()
	if err := ks.Load(bytes.NewReader(data), []byte(storePW)); err != nil {
		return nil, err
	}
	var aliases []string
	for _, a := range ks.Aliases() {
		if ks.IsPrivateKeyEntry(a) {
			aliases = append(aliases, a)
		}
	}
	if len(aliases) != 1 {
		return nil, fmt.Errorf("holds %d private key entries; the client's key store needs exactly one", len(aliases))
	}
	e, err := ks.GetPrivateKeyEntry(aliases[0], []byte(keyPW))
	if err != nil {
		return nil, fmt.Errorf("entry %q: %v (key_password: the entry's, when not the store's)", aliases[0], err)
	}
	key, err := x509.ParsePKCS8PrivateKey(e.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("entry %q: %v", aliases[0], err)
	}
	cert := &tls.Certificate{PrivateKey: key}
	for _, c := range e.CertificateChain {
		cert.Certificate = append(cert.Certificate, c.Content)
	}
	return leafOf(cert)
}

// pkcs12Key is a PKCS12 store's key and certificate chain.
func pkcs12Key(data []byte, pw string) (*tls.Certificate, error) {
	key, leaf, chain, err := pkcs12.DecodeChain(data, pw)
	if err != nil {
		return nil, err
	}
	cert := &tls.Certificate{PrivateKey: key, Certificate: [][]byte{leaf.Raw}}
	for _, c := range chain {
		cert.Certificate = append(cert.Certificate, c.Raw)
	}
	return leafOf(cert)
}

// leafOf checks that cert's key is the one its first certificate names.
func leafOf(cert *tls.Certificate) (*tls.Certificate, error) {
	if len(cert.Certificate) == 0 {
		return nil, errors.New("the key entry has no certificate")
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, err
	}
	pub, ok := cert.PrivateKey.(interface{ Public() crypto.PublicKey })
	if !ok || !pub.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(leaf.PublicKey) {
		return nil, errors.New("the key does not match its certificate")
	}
	cert.Leaf = leaf
	return cert, nil
}

// storeKeys are the keys of the stores that hold passwords, under each TLS
// section: the config file may not set them (passwordKeys).
var storeKeys = []string{"truststore_password", "keystore_password", "key_password"}

// fromStores fills c's roots and client certificate from the stores, and
// reports each store key that conflicts with its PEM counterpart or is set
// without its file. Errors name the key relative to the TLS section.
func (t TLS) fromStores(c *tls.Config) []error {
	return append(t.trustFrom(c), t.keyFrom(c)...)
}

// trustFrom fills c's roots from the trust store (fromStores).
func (t TLS) trustFrom(c *tls.Config) []error {
	s := t.Stores
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case s.TruststoreFile != "" && t.CAFile != "":
		add("truststore_file: set together with ca_file; set only one")
	case s.TruststoreFile != "" && t.InsecureSkipVerify:
		add("insecure_skip_verify: true ignores truststore_file %s; set one of them", s.TruststoreFile)
	case s.TruststoreFile != "":
		pool, err := s.trustPool()
		if err != nil {
			errs = append(errs, err)
		}
		c.RootCAs = pool
	case s.TruststoreType != "" || s.TruststorePassword != "" || s.TruststorePasswordFile != "":
		add("truststore_file: required with truststore_type and truststore_password")
	}
	return errs
}

// keyFrom fills c's client certificate from the key store (fromStores).
func (t TLS) keyFrom(c *tls.Config) []error {
	s := t.Stores
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case s.KeystoreFile != "" && (t.CertFile != "" || t.KeyFile != ""):
		add("keystore_file: set together with cert_file and key_file; set only one")
	case s.KeystoreFile != "":
		cert, err := s.clientCert()
		if err != nil {
			errs = append(errs, err)
		} else {
			c.Certificates = []tls.Certificate{*cert}
		}
	case s.KeystoreType != "" || s.KeystorePassword != "" || s.KeystorePasswordFile != "" || s.KeyPassword != "" || s.KeyPasswordFile != "":
		add("keystore_file: required with keystore_type, keystore_password and key_password")
	}
	return errs
}
