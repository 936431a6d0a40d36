package consumer

import (
	"testing"

	"sink/config"
)

func TestFetchLimitsFor(t *testing.T) {
	f := func(buffer, fetch, part string, want FetchLimits) {
		t.Helper()
		yaml := "name: x\nkafka: {topics: [t], fetch_min_bytes: 1KiB, fetch_max_bytes: " + fetch + ", max_partition_fetch_bytes: " + part + "}\n" +
			"batch: {buffer_memory: " + buffer + ", max_bytes: 1MiB}\nroutes: [{topic: t, table: t}]\n"
		cfg, err := config.Parse([]byte(yaml), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := FetchLimitsFor(cfg); got != want {
			t.Fatalf("buffer_memory %s, fetch_max_bytes %s, max_partition_fetch_bytes %s: got %+v, want %+v", buffer, fetch, part, got, want)
		}
	}
	const mib = 1 << 20
	// the defaults (50 MiB, 8 MiB) under the default budget: 256 MiB / 32
	f("256MiB", "50MiB", "8MiB", FetchLimits{MaxBytes: 8 * mib, PartitionBytes: 8 * mib, Concurrent: 2})
	// a small budget lowers both
	f("64MiB", "50MiB", "8MiB", FetchLimits{MaxBytes: 2 * mib, PartitionBytes: 2 * mib, Concurrent: 2})
	// never below 1 MiB from the derivation...
	f("16MiB", "50MiB", "8MiB", FetchLimits{MaxBytes: mib, PartitionBytes: mib, Concurrent: 2})
	// ...but a smaller configured value stays
	f("256MiB", "512KiB", "256KiB", FetchLimits{MaxBytes: 512 << 10, PartitionBytes: 256 << 10, Concurrent: 2})
	// a big budget keeps the configured sizes
	f("4GiB", "50MiB", "8MiB", FetchLimits{MaxBytes: 50 * mib, PartitionBytes: 8 * mib, Concurrent: 2})
	// unset (the deprecated keys left out): the derived sizes alone
	f("256MiB", "0", "0", FetchLimits{MaxBytes: 8 * mib, PartitionBytes: 8 * mib, Concurrent: 2})
	f("64MiB", "0", "0", FetchLimits{MaxBytes: 2 * mib, PartitionBytes: 2 * mib, Concurrent: 2})
	f("16MiB", "0", "0", FetchLimits{MaxBytes: mib, PartitionBytes: mib, Concurrent: 2})
	// a big budget: a fetch of Kafka's default 50 MiB, 8 MiB per partition
	f("4GiB", "0", "0", FetchLimits{MaxBytes: 50 * mib, PartitionBytes: 8 * mib, Concurrent: 2})
	// a configured value never raises the derived one
	f("64MiB", "50MiB", "0", FetchLimits{MaxBytes: 2 * mib, PartitionBytes: 2 * mib, Concurrent: 2})
	f("256MiB", "0", "1MiB", FetchLimits{MaxBytes: 8 * mib, PartitionBytes: mib, Concurrent: 2})
}

// withBufferMemory is a config whose batch.buffer_memory is buffer.
func withBufferMemory(t *testing.T, buffer string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte("name: x\nkafka: {topics: [a]}\nbatch: {buffer_memory: "+buffer+"}\nroutes: [{topic: a, table: t}]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestMemoryLimit(t *testing.T) {
	f := func(buffer string, want int64) {
		t.Helper()
		cfg := withBufferMemory(t, buffer)
		if got := MemoryLimit(cfg); got != want {
			t.Fatalf("buffer_memory %s: got %d, want %d", buffer, got, want)
		}
	}
	// Up to 80 MiB, what the heap holds with the budget full is below the
	// RSS bound less the process's memory outside the heap; above, that
	// bound is the limit.
	f("64MiB", (64+32+64)<<20)
	f("80MiB", (80+40+64)<<20)
	f("256MiB", (256+104)<<20)
	f("1GiB", (1024+104)<<20)
	for _, buffer := range []string{"32MiB", "64MiB", "80MiB", "256MiB", "4GiB"} {
		cfg := withBufferMemory(t, buffer)
		if got, bound := MemoryLimit(cfg), int64(cfg.Batch.BufferMemory)+RSSHeadroom; got > bound-24<<20 {
			t.Fatalf("buffer_memory %s: limit %d leaves less than 24 MiB below the RSS bound %d", buffer, got, bound)
		}
	}
}

func TestSpareLimit(t *testing.T) {
	f := func(buffer string, want int) {
		t.Helper()
		cfg := withBufferMemory(t, buffer)
		got := SpareLimit(cfg)
		if got != want {
			t.Fatalf("buffer_memory %s: got %d, want %d", buffer, got, want)
		}
		// The spares live in MemoryLimit's share for block capacity the
		// budget does not count (buffer_memory / FetchShare).
		if int64(got) > int64(cfg.Batch.BufferMemory)/FetchShare {
			t.Fatalf("buffer_memory %s: spares of %d exceed the uncounted block share", buffer, got)
		}
	}
	f("256MiB", 32<<20)
	f("64MiB", 8<<20)
}
