package column

import (
	"testing"

	"sink/internal/chtype"
)

// parseTypeSeeds are type strings the fuzz target starts from.
var parseTypeSeeds = []string{
	"Int128", "UInt256", "Tuple(a UInt8, b String)", "Tuple(UInt8, Array(Nullable(String)))",
	"Nested(a UInt32, b Nested(c String))", "Variant(String, UInt64, Array(UInt8))", "Dynamic(max_types=8)",
	"JSON(max_dynamic_paths=10, a.b UInt32, SKIP x, SKIP REGEXP 'y.*', `c d` DateTime64(3))",
	"Map(LowCardinality(String), Array(Nullable(Decimal(38, 10))))", `Enum8('it\'s' = 1, 'b' = 2)`,
	"DateTime64(9, 'Asia/Tokyo')", "LowCardinality(Nullable(String))", "Tuple(`a``b` Int8)", "JSON(a Map(String, UInt8))",
}

// FuzzParseType: no type string makes parsing, the support check, building
// a column buffer or the driver check panic.
func FuzzParseType(f *testing.F) {
	for _, s := range parseTypeSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ct := chtype.Parse(s)
		if ct.Unsupported() {
			return
		}
		newCol(ct)
		_ = CheckDriver(s, ct)
	})
}
