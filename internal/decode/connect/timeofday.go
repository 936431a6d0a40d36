package connect

import (
	"time"

	"sink/internal/decode/column"
)

func semLabel(k SemKind) string {
	switch k {
	case SemDate:
		return "Date"
	case SemTsMillis:
		return "Timestamp"
	case SemTsMicros:
		return "MicroTimestamp"
	case SemTsNanos:
		return "NanoTimestamp"
	case SemTimeMillis:
		return "Time"
	case SemTimeMicros:
		return "MicroTime"
	case SemTimeNanos:
		return "NanoTime"
	}
	return "value"
}

// timeOfDay is a Debezium Time, MicroTime or NanoTime value in nanoseconds
// since midnight: 0 to 24:00:00 (PostgreSQL's time and timetz take
// '24:00:00', the end of the day).
// tod is false when k is not a time of day.
func timeOfDay(k SemKind, n int64) (ns int64, ok, tod bool) {
	var unit int64
	switch k {
	case SemTimeMillis:
		unit = int64(time.Millisecond)
	case SemTimeMicros:
		unit = int64(time.Microsecond)
	case SemTimeNanos:
		unit = 1
	default:
		return 0, false, false
	}
	if n < 0 || n > int64(24*time.Hour)/unit {
		return 0, false, true
	}
	return n * unit, true, true
}

// zonedTimeOfDay reads a ZonedTime, "15:04:05[.fraction](Z|±hh[:mm])", as
// nanoseconds since midnight UTC. Debezium writes it in UTC ("Z"); another
// offset is moved to UTC within the day. "24:00:00Z" is the end of the day.
func zonedTimeOfDay(b []byte) (int64, bool) {
	if len(b) < 9 || b[2] != ':' || b[5] != ':' {
		return 0, false
	}
	h, ok1 := twoDigits(b[0:2])
	m, ok2 := twoDigits(b[3:5])
	sec, ok3 := twoDigits(b[6:8])
	if !ok1 || !ok2 || !ok3 || h > 24 || m > 59 || sec > 59 || (h == 24 && (m != 0 || sec != 0)) {
		return 0, false
	}
	ns := (h*3600 + m*60 + sec) * int64(time.Second)
	i := 8
	if b[i] == '.' {
		i++
		scale := int64(time.Second)
		start := i
		for ; i < len(b) && digit(b[i]); i++ {
			if scale /= 10; scale == 0 {
				return 0, false // beyond nanoseconds
			}
			ns += int64(b[i]-'0') * scale
		}
		if i == start || (h == 24 && ns != int64(24*time.Hour)) {
			return 0, false
		}
	}
	zone := b[i:]
	if len(zone) == 1 && zone[0] == 'Z' {
		return ns, true
	}
	if len(zone) != 3 && len(zone) != 6 || (zone[0] != '+' && zone[0] != '-') {
		return 0, false
	}
	oh, ok1 := twoDigits(zone[1:3])
	var om int64
	ok2 = true
	if len(zone) == 6 {
		if zone[3] != ':' {
			return 0, false
		}
		om, ok2 = twoDigits(zone[4:6])
	}
	if !ok1 || !ok2 || oh > 15 || om > 59 {
		return 0, false
	}
	off := (oh*3600 + om*60) * int64(time.Second)
	if zone[0] == '+' {
		off = -off
	}
	day := int64(24 * time.Hour)
	if ns == day && off == 0 {
		return ns, true
	}
	return ((ns+off)%day + day) % day, true
}

func twoDigits(b []byte) (int64, bool) {
	if !digit(b[0]) || !digit(b[1]) {
		return 0, false
	}
	return int64(b[0]-'0')*10 + int64(b[1]-'0'), true
}

// unixMicro is t in microseconds since the epoch, when int64 holds it.
func unixMicro(t time.Time) (int64, bool) {
	if t.Year() < -290000 || t.Year() > 290000 {
		return 0, false
	}
	return t.UnixMicro(), true
}

// appendTimeOfDay formats ns since midnight as "15:04:05" with the
// fraction's trailing zeros cut, and the hour 24 for the end of the day.
func appendTimeOfDay(b []byte, ns int64) []byte {
	sec := ns / int64(time.Second)
	frac := ns % int64(time.Second)
	two := func(b []byte, n int64) []byte { return append(b, byte('0'+n/10), byte('0'+n%10)) }
	b = two(b, sec/3600)
	b = append(b, ':')
	b = two(b, sec/60%60)
	b = append(b, ':')
	b = two(b, sec%60)
	if frac == 0 {
		return b
	}
	digits := 9
	for frac%10 == 0 {
		frac /= 10
		digits--
	}
	b = append(b, '.')
	for p := digits - 1; p >= 0; p-- {
		div := int64(1)
		for range p {
			div *= 10
		}
		b = append(b, byte('0'+frac/div%10))
	}
	return b
}

// Days beyond ±2^31 or times beyond what int64 nanoseconds hold do not
// occur in Debezium output; refusing them keeps the arithmetic exact.
const maxDays = 1 << 31

// semTime turns a Debezium date or timestamp number into an instant.
func semTime(k SemKind, n int64) (time.Time, bool) {
	switch k {
	case SemDate:
		if n >= maxDays || n < -maxDays {
			return time.Time{}, false
		}
		return time.Unix(n*column.SecondsPerDay, 0).UTC(), true
	case SemTsMillis:
		return time.UnixMilli(n).UTC(), true
	case SemTsMicros:
		return time.UnixMicro(n).UTC(), true
	case SemTsNanos:
		return time.Unix(0, n).UTC(), true
	}
	return time.Time{}, false
}
