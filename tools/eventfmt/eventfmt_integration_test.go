//go:build integration

package eventfmt

import (
	"testing"

	"sink/internal/testenv"
)

// Against the stack's registry, which validates and may normalize what is
// registered (the Protobuf schema imports a well-known type).
func TestRoundTripRegistry(t *testing.T) {
	roundTrip(t, testenv.Registry(t), 50)
}
