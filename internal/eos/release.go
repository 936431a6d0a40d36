package eos

import "sink/internal/offsets"

// Unrecorded is a batch whose intent is not recorded, as release planning
// sees it: sealed (ID names it, Tried says an intent commit of it was sent
// and failed, so whether it is recorded is unknown) or open (Open; its
// records are still being added), and the ranges of records it holds.
type Unrecorded struct {
	ID     uint64
	Open   bool
	Tried  bool
	Ranges []Range
}

// Release is what giving up partitions does to the batches not recorded.
type Release struct {
	// Drop are the batches (sealed and open) that can no longer be recorded
	// as they are: each holds records of a partition given up, or of a
	// kept partition from its seek point on. Same order as the input.
	Drop []Unrecorded
	// Seek is, per kept partition, the first offset a dropped batch holds
	// of it: the partition is consumed again from there.
	Seek map[offsets.TP]int64
	// Stop is set when a dropped batch was tried (its intent may be
	// recorded after all) and holds a kept partition: nothing may be
	// dropped or built again, the member stops. Lost names a given-up
	// partition, Kept one of the batch's kept partitions.
	Stop       bool
	StopBatch  uint64
	Lost, Kept offsets.TP
}

// PlanRelease plans the release of the partitions gone, given the batches
// not yet recorded (the recorded ones are left alone: their next owner
// replays them with the same token). A batch holding records of a
// partition gone is dropped, and with it the records it holds of kept
// partitions, which are sought back to the first offset it holds of them;
// every other such batch holding records of a sought partition from its
// seek point on is dropped as well, and so on until nothing changes. A
// tried batch holding a kept partition stops the member instead (its
// intent may be recorded: its records can neither be inserted nor batched
// again); a tried batch holding only partitions gone is dropped, since
// their next owners settle it from the ledgers.
//
// It is a pure function: the caller applies the plan.
func PlanRelease(given []offsets.TP, batches []Unrecorded) Release {
	gone := make(map[offsets.TP]bool, len(given))
	for _, tp := range given {
		gone[tp] = true
	}
	dropped, seek := dropsOf(gone, batches)
	var out Release
	for i, b := range batches {
		if !dropped[i] {
			continue
		}
		if lost, kept, stop := triedHoldsKept(gone, b); stop {
			if lost == nil { // dropped for a kept partition sought back only
				lost = &given[0]
			}
			return Release{Stop: true, StopBatch: b.ID, Lost: *lost, Kept: kept}
		}
		out.Drop = append(out.Drop, b)
	}
	if len(out.Drop) > 0 {
		out.Seek = seek
	}
	return out
}

// dropsOf finds which batches are dropped (by index) when the partitions
// gone are given up, and the offset each kept partition is sought back to:
// a batch that holds a partition gone, or a kept one from its seek point
// on, is dropped and seeks its kept partitions back to the first offset it
// holds, until no other batch is caught.
func dropsOf(gone map[offsets.TP]bool, batches []Unrecorded) ([]bool, map[offsets.TP]int64) {
	seek := map[offsets.TP]int64{}
	dropped := make([]bool, len(batches))
	for more := true; more; {
		more = false
		for i, b := range batches {
			if dropped[i] || !released(gone, seek, b.Ranges) {
				continue
			}
			dropped[i], more = true, true
			seekBack(gone, seek, b.Ranges)
		}
	}
	return dropped, seek
}

// released reports whether rs holds a partition gone, or a sought one from
// its seek point on.
func released(gone map[offsets.TP]bool, seek map[offsets.TP]int64, rs []Range) bool {
	for _, r := range rs {
		if at, ok := seek[r.TP]; gone[r.TP] || (ok && r.Last >= at) {
			return true
		}
	}
	return false
}

// seekBack lowers the seek point of each kept partition of rs to the
// first offset rs holds of it.
func seekBack(gone map[offsets.TP]bool, seek map[offsets.TP]int64, rs []Range) {
	for _, r := range rs {
		if at, ok := seek[r.TP]; !gone[r.TP] && (!ok || r.First < at) {
			seek[r.TP] = r.First
		}
	}
}

// triedHoldsKept reports whether b was tried and holds a kept partition,
// with one partition of b gone (nil when b holds none) and one kept.
func triedHoldsKept(gone map[offsets.TP]bool, b Unrecorded) (lost *offsets.TP, kept offsets.TP, stop bool) {
	if !b.Tried || b.Open {
		return nil, kept, false
	}
	for _, r := range b.Ranges {
		if gone[r.TP] {
			tp := r.TP
			lost = &tp
		} else {
			kept, stop = r.TP, true
		}
	}
	return lost, kept, stop
}
