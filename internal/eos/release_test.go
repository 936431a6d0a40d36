package eos

import (
	"reflect"
	"testing"

	"sink/internal/offsets"
)

func TestPlanRelease(t *testing.T) {
	a0, a1, b0 := tp("a", 0), tp("a", 1), tp("b", 0)
	sealed := func(id uint64, tried bool, rs ...Range) Unrecorded {
		return Unrecorded{ID: id, Tried: tried, Ranges: rs}
	}
	open := func(id uint64, rs ...Range) Unrecorded { return Unrecorded{ID: id, Open: true, Ranges: rs} }
	cases := []struct {
		name    string
		gone    []offsets.TP
		batches []Unrecorded
		want    Release
	}{
		{name: "nothing unrecorded", gone: []offsets.TP{a0}, want: Release{}},
		{name: "batches of kept partitions only stay", gone: []offsets.TP{a0},
			batches: []Unrecorded{sealed(1, false, Range{a1, 0, 9}), open(2, Range{b0, 0, 3})},
			want:    Release{}},
		{name: "a batch of the partition gone alone is dropped, nothing sought", gone: []offsets.TP{a0},
			batches: []Unrecorded{sealed(1, false, Range{a0, 0, 9}), sealed(2, false, Range{a1, 0, 9})},
			want:    Release{Drop: []Unrecorded{sealed(1, false, Range{a0, 0, 9})}, Seek: map[offsets.TP]int64{}}},
		{name: "its kept partition is sought back to the batch's first offset", gone: []offsets.TP{a0},
			batches: []Unrecorded{sealed(1, false, Range{a0, 0, 9}, Range{a1, 5, 8})},
			want: Release{Drop: []Unrecorded{sealed(1, false, Range{a0, 0, 9}, Range{a1, 5, 8})},
				Seek: map[offsets.TP]int64{a1: 5}}},
		{name: "later batches of a sought partition go too, and so on", gone: []offsets.TP{a0},
			batches: []Unrecorded{
				sealed(1, false, Range{a0, 0, 9}, Range{a1, 5, 8}),
				sealed(2, false, Range{a1, 0, 4}),                   // before the seek point: stays
				sealed(3, false, Range{a1, 9, 12}, Range{b0, 7, 9}), // after it: dropped, b0 sought to 7
				open(4, Range{b0, 10, 11}),                          // past b0's seek point: dropped
				open(5, Range{b0, 0, 6}),                            // before it: stays
			},
			want: Release{Drop: []Unrecorded{
				sealed(1, false, Range{a0, 0, 9}, Range{a1, 5, 8}),
				sealed(3, false, Range{a1, 9, 12}, Range{b0, 7, 9}),
				open(4, Range{b0, 10, 11}),
			}, Seek: map[offsets.TP]int64{a1: 5, b0: 7}}},
		{name: "the lowest first offset of a partition wins", gone: []offsets.TP{a0},
			batches: []Unrecorded{open(2, Range{a0, 10, 12}, Range{a1, 20, 21}), sealed(1, false, Range{a0, 0, 9}, Range{a1, 10, 19})},
			want: Release{Drop: []Unrecorded{open(2, Range{a0, 10, 12}, Range{a1, 20, 21}), sealed(1, false, Range{a0, 0, 9}, Range{a1, 10, 19})},
				Seek: map[offsets.TP]int64{a1: 10}}},
		{name: "a tried batch of partitions gone only is dropped", gone: []offsets.TP{a0, a1},
			batches: []Unrecorded{sealed(1, true, Range{a0, 0, 9}, Range{a1, 0, 3})},
			want:    Release{Drop: []Unrecorded{sealed(1, true, Range{a0, 0, 9}, Range{a1, 0, 3})}, Seek: map[offsets.TP]int64{}}},
		{name: "a tried batch holding a kept partition stops", gone: []offsets.TP{a0},
			batches: []Unrecorded{sealed(1, true, Range{a0, 0, 9}, Range{b0, 0, 3})},
			want:    Release{Stop: true, StopBatch: 1, Lost: a0, Kept: b0}},
		{name: "a tried batch dropped for a sought partition stops, naming the first partition given up", gone: []offsets.TP{b0, a0},
			batches: []Unrecorded{sealed(1, false, Range{a0, 0, 9}, Range{a1, 5, 8}), sealed(2, true, Range{a1, 9, 9})},
			want:    Release{Stop: true, StopBatch: 2, Lost: b0, Kept: a1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := PlanRelease(c.gone, c.batches)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("PlanRelease(%v) =\n%+v\nwant\n%+v", c.gone, got, c.want)
			}
		})
	}
}
