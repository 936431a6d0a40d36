package testenv

import "testing"

func TestParseVersion(t *testing.T) {
	f := func(v string, major, minor int) {
		t.Helper()
		if gotMaj, gotMin := parseVersion(v); gotMaj != major || gotMin != minor {
			t.Errorf("parseVersion(%q) = %d, %d; want %d, %d", v, gotMaj, gotMin, major, minor)
		}
	}
	f("18.16.1", 18, 16)
	f("26.9.2.1", 26, 9)
	f("", 0, 0)
	f("x.y", 0, 0)
}
