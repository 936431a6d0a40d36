package consumer

import (
	"os"
	"testing"
	"time"
)

// TestMain shortens the group heartbeat for every test of the package: the
// rebalance tests wait for members to hear of a rebalance, which they do
// on their next heartbeat.
func TestMain(m *testing.M) {
	heartbeatInterval = 100 * time.Millisecond
	os.Exit(m.Run())
}
