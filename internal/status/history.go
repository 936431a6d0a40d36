package status

import "time"

// Window is how far back History remembers: the status page's chart spans
// it, and Table.Rows15m sums it.
const Window = 15 * time.Minute

// SeriesStep is the spacing of a Series' points.
const SeriesStep = 10 * time.Second

// histSlots is the ring's length in seconds: the window, plus the minute
// before it that the window's first rolling point sums.
const histSlots = int((Window + time.Minute) / time.Second)

// History counts one table's successful INSERTs and their rows per second
// of acknowledgement, in a fixed ring of histSlots seconds: bounded
// whatever the insert rate. Not safe for concurrent use (the owner
// goroutine's).
type History struct {
	sec     [histSlots]int64 // the Unix second a slot counts; a slot from an older lap is stale
	rows    [histSlots]int64
	inserts [histSlots]int64
}

// Add counts one INSERT of rows, acknowledged at now.
func (h *History) Add(now time.Time, rows int) {
	s := now.Unix()
	i := slot(s)
	if h.sec[i] != s {
		h.sec[i], h.rows[i], h.inserts[i] = s, 0, 0
	}
	h.rows[i] += int64(rows)
	h.inserts[i]++
}

func slot(sec int64) int {
	i := int(sec % int64(histSlots))
	if i < 0 {
		i += histSlots
	}
	return i
}

// Sums returns the rows and inserts acknowledged in the d (at most
// Window + 1 minute) that end at now: the seconds now-d+1 .. now.
func (h *History) Sums(now time.Time, d time.Duration) (rows, inserts int64) {
	end := now.Unix()
	n := min(int64(d/time.Second), int64(histSlots))
	for s := end - n + 1; s <= end; s++ {
		if i := slot(s); h.sec[i] == s {
			rows += h.rows[i]
			inserts += h.inserts[i]
		}
	}
	return rows, inserts
}

// Series returns the rolling per-minute rates over the Window that ends
// at now, one point per SeriesStep, the last one at now.
func (h *History) Series(now time.Time) Series {
	step := int64(SeriesStep / time.Second)
	points := int(Window/SeriesStep) + 1
	end := now.Unix()
	first := end - int64(points-1)*step
	out := Series{
		StepSeconds:   int(step),
		Start:         time.Unix(first, 0).UTC(),
		RowsPerMin:    make([]int64, points),
		InsertsPerMin: make([]int64, points),
	}
	for p := range points {
		out.RowsPerMin[p], out.InsertsPerMin[p] = h.Sums(time.Unix(first+int64(p)*step, 0), time.Minute)
	}
	return out
}
