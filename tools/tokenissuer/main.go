// Command tokenissuer is a small OpenID Connect token issuer for the local
// stack's OAUTHBEARER listener and the tests that use it; it is test
// material and serves on loopback only. It offers what Kafka's broker-side
// JWT validator and a client-credentials client need:
//
//	GET  /.well-known/openid-configuration  discovery (issuer, token_endpoint, jwks_uri)
//	GET  /jwks                              the signing keys' public halves (RFC 7517)
//	POST /token                             client_credentials grant; answers an RS256 JWT
//	                                        with iss, sub (the client id), aud, iat, exp, scope
//
// and, for tests only, a control API:
//
//	POST /control/clients  {"id", "secret", "audience": [...], "lifetime": "20s", "fail_status": 503,
//	                       "own_keys": true} registers (or replaces) a client: its tokens' audience
//	                       and lifetime, an HTTP status every request of it gets, keys of its own
//	                       (answered once they have been published for --announce)
//	POST /control/rotate   sign with the key published as the next one (once it has been
//	                       published for --announce), and publish a new next key;
//	                       ?unannounced=true signs with a key published only now (a broker
//	                       refuses the first token it signs, until it has fetched the JWKS
//	                       again); ?drop_old=true unpublishes the old keys; ?client=ID rotates
//	                       that client's own keys instead of the issuer's
//	GET  /control/keys     the published key ids, the active one and the next one (?client=ID),
//	                       and how long ago a broker last fetched the JWKS
//	GET  /control/issued/ID  the tokens issued to client ID, per signing key id
//
// The issuer publishes the key it will sign with next before it signs with
// it, as providers that rotate well do; a test that rotates keys gives its
// client keys of its own, so that other tests' tokens keep their keys. Keys live in memory: a restarted
// issuer has new ones, which a broker fetches again when it meets a token
// with an unknown key id (refusing that first token).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9096", "host:port to serve on (loopback)")
	issuerURL := flag.String("issuer", "", "the iss claim and base URL (default http://LISTEN)")
	audience := flag.String("audience", "sink-stack-kafka", "comma-separated default aud claim of the tokens")
	lifetime := flag.Duration("lifetime", time.Hour, "default lifetime of a token")
	announce := flag.Duration("announce", 6*time.Second, "how long a key is published before an announced rotation signs with it (longer than the brokers' JWKS refresh)")
	clients := flag.String("clients", "sink:sink-oauth-secret", "comma-separated ID:SECRET clients registered at start")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: tokenissuer [flags]\n\nA test OpenID Connect token issuer (client credentials, JWKS, a control API).\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*listen, *issuerURL, *audience, *lifetime, *announce, *clients); err != nil {
		fmt.Fprintf(os.Stderr, "tokenissuer: %v\n", err)
		os.Exit(1)
	}
}

func run(listen, issuerURL, audience string, lifetime, announce time.Duration, clients string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--listen %s: loopback only, this is test material", listen)
	}
	if issuerURL == "" {
		issuerURL = "http://" + listen
	}
	is, err := newIssuer(issuerURL, strings.Split(audience, ","), lifetime, announce)
	if err != nil {
		return err
	}
	for _, c := range strings.Split(clients, ",") {
		if c == "" {
			continue
		}
		id, secret, ok := strings.Cut(c, ":")
		if !ok || id == "" || secret == "" {
			return fmt.Errorf("--clients: %q is not ID:SECRET", c)
		}
		is.clients[id] = client{Secret: secret}
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: is.routes(), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(os.Stderr, "tokenissuer: issuer %s, token endpoint %s/token, JWKS %s/jwks, audience %s\n", is.url, is.url, is.url, audience)
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
