package pipeline

import (
	"os"
	"testing"

	"sink/internal/decode/column"
)

// TestMain runs the package's tests with String buffers kept between
// batches, as the process keeps them (assemble.Open sets the limit from
// batch.buffer_memory; 32 MiB is the default's): a block's buffer is then
// taken over by a later block once its batch is in, so every test here
// also checks that nothing reads a batch's rows after that.
func TestMain(m *testing.M) {
	column.SetSpareLimit(32 << 20)
	os.Exit(m.Run())
}
