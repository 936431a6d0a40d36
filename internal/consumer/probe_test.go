package consumer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestProbeRetriable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{io.EOF, true},
		{errors.New("broker closed the connection immediately after a request was issued"), true},
		{fmt.Errorf("dial: %w", errors.New("connection refused")), true},
		{kerr.SaslAuthenticationFailed, false},
		{kerr.UnsupportedSaslMechanism, false},
		{kerr.IllegalSaslState, false},
		{&tls.CertificateVerificationError{Err: errors.New("x509")}, false},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, false},
		{errors.New("remote error: tls: certificate required"), false},
		{context.DeadlineExceeded, false},
		{kgo.ErrClientClosed, false},
	} {
		if got := probeRetriable(tc.err); got != tc.want {
			t.Errorf("probeRetriable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
