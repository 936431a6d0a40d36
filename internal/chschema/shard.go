package chschema

// Placer names the shard of a row by its sharding key's value, as a
// cluster's Distributed engine would place it (cluster.Placement is one).
// The decoder asks it once per row, as the row is appended, so that each
// shard's rows go straight into that shard's part of the batch
// (decode.Block's sharded form); the writer sends each part to its shard.
//
// Concurrency: a Placer is immutable and safe for concurrent use.
type Placer interface {
	// ShardCount is the number of shards; the methods below return 0 …
	// ShardCount()-1.
	ShardCount() int
	// PlaceBits places a row whose integer key (or Date: days, DateTime:
	// seconds) has the bits b, zero-extended from the key's width to 64.
	PlaceBits(b uint64) int
	// PlaceBytes places a row whose String or FixedString key is b.
	PlaceBytes(b []byte) int
}

// ShardedBlock is a Block whose rows were placed on shards as they were
// appended: one part per shard (nil for a shard without rows), placed by
// Placer. Its Rows and ColumnData are the parts' one after the other.
type ShardedBlock interface {
	Block
	ShardParts() (parts []Block, by Placer)
}
