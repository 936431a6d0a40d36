package column

import (
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/column"

	"sink/internal/chtype"
)

// CheckDriver checks that clickhouse-go builds its column for a type the
// way this package reads it. clickhouse-go parses the column types of every
// INSERT's header itself; v2.51 panics on an Enum whose element name is
// written with an escape ('it\'s', 'a\\b', 'x\ny') unless that element
// comes last (the server lists elements by value). A type it would
// mishandle is refused here, when the plan is compiled (so sink check and
// sink run fail at start with the column named), never at the first insert.
func CheckDriver(colType string, t *chtype.Type) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("clickhouse-go cannot parse this type (it fails with %q): an Enum name with an escape must be its highest-valued element (docs/formats.md#column-types)", fmt.Sprint(r))
		}
	}()
	sc := &column.ServerContext{Timezone: time.UTC, VersionMajor: 26, VersionMinor: 9, Revision: 54460}
	// Only a panic counts: the server spells some types differently from
	// how a schema may be written (Decimal32(2) is Decimal(9, 2)).
	_, _ = column.Type(colType).Column("c", sc)
	return checkEnums(t, sc)
}

// checkEnums checks, for every Enum inside t, that clickhouse-go takes each
// element value this package sends (values are what an INSERT carries, so
// names it unescapes differently do not matter).
func checkEnums(t *chtype.Type, sc *column.ServerContext) error {
	for _, e := range []*chtype.Type{t.Elem, t.Key} {
		if e != nil {
			if err := checkEnums(e, sc); err != nil {
				return err
			}
		}
	}
	for _, e := range t.Elems {
		if err := checkEnums(e, sc); err != nil {
			return err
		}
	}
	if t.Kind != chtype.Enum8 && t.Kind != chtype.Enum16 {
		return nil
	}
	col, err := column.Type(t.Text).Column("c", sc)
	if err != nil {
		return fmt.Errorf("clickhouse-go cannot carry %s: %v", t.Text, err)
	}
	for name, v := range t.EnumByName {
		var data any = []int16{v}
		if t.Kind == chtype.Enum8 {
			data = []int8{int8(v)}
		}
		if _, err := col.Append(data); err != nil {
			return fmt.Errorf("clickhouse-go misreads %s (it refuses element %q = %d: %v)", t.Text, name, v, err)
		}
	}
	return nil
}
