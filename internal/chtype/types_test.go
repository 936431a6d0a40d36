package chtype

import (
	"strings"
	"testing"
)

func TestParseModernTypes(t *testing.T) {
	f := func(s string, want string) {
		t.Helper()
		if got := describe(Parse(s)); got != want {
			t.Errorf("Parse(%q) = %s, want %s", s, got, want)
		}
	}
	f("Int128", "Int128")
	f("UInt256", "UInt256")
	f("Tuple(UInt8, String)", "Tuple(UInt8, String)")
	f("Tuple(a UInt8, `b c` Nullable(String))", "Tuple(a UInt8, b c Nullable(String))")
	f("Tuple(DateTime64(3, 'UTC'), Array(Int8))", "Tuple(DateTime64(3, 'UTC'), Array(Int8))")
	f("Nested(a UInt32, b String)", "Array(Tuple(a UInt32, b String))")
	f("Variant(String, UInt64, Array(UInt8))", "Variant(String, UInt64, Array(UInt8))")
	f("Dynamic", "Dynamic")
	f("Dynamic(max_types=8)", "Dynamic")
	f("JSON", "JSON()")
	f("JSON(max_dynamic_paths=10, a.b UInt32, SKIP x, SKIP REGEXP 'y.*', `c d` DateTime64(3))", "JSON(a.b UInt32, c d DateTime64(3))")
	// As 26.9 prints them in system.columns:
	f("JSON(max_dynamic_types=3, max_dynamic_paths=10, `a.b` UInt32, `c d` String, SKIP `x.y`, SKIP REGEXP '^z')", "JSON(a.b UInt32, c d String)")
	f("Tuple(`a b` UInt8, `from` String)", "Tuple(a b UInt8, from String)")
	f("Tuple(a UInt8, String)", "unsupported")
	f("Nested(UInt8)", "unsupported")
	f("Tuple()", "unsupported")
	f("Variant()", "unsupported")
	f("Dynamic(x)", "unsupported")
}

// describe renders a parsed type's structure for TestParseModernTypes.
func describe(t *Type) string {
	if t.Unsupported() {
		return "unsupported"
	}
	part := func(i int) string {
		if i < len(t.Names) && t.Names[i] != "" {
			return t.Names[i] + " " + describe(t.Elems[i])
		}
		return describe(t.Elems[i])
	}
	join := func(name string) string {
		var ps []string
		for i := range t.Elems {
			ps = append(ps, part(i))
		}
		return name + "(" + strings.Join(ps, ", ") + ")"
	}
	switch t.Kind {
	case Tuple:
		return join("Tuple")
	case Variant:
		return join("Variant")
	case JSON:
		return join("JSON")
	case Dynamic:
		return "Dynamic"
	case Array:
		return "Array(" + describe(t.Elem) + ")"
	case Nullable:
		return "Nullable(" + describe(t.Elem) + ")"
	}
	return t.Text
}
