package decode

import (
	"encoding/base64"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fastjson"

	"sink/internal/decode/column"
)

// Values a change event does not carry. PostgreSQL writes an UPDATE's new
// row to the WAL without the large (TOASTed) values the UPDATE did not
// change, and Debezium, which reads the WAL, cannot send them: under
// REPLICA IDENTITY DEFAULT it puts a placeholder in their place (the
// connector's unavailable.value.placeholder, "__debezium_unavailable_value"
// unless set otherwise). Writing the placeholder would overwrite the real
// value in ClickHouse, so the debezium formats never append it as data:
// the row gets the column's zero for now and the cell is listed in the
// block (Block.Unfilled), with the columns that identify the row (the
// record key's fields, Block.FillKeys). Before the block is inserted, the
// pipeline gives each such cell the value the row had before: from an
// earlier row of the same key in the block, else from ClickHouse
// (Block.Fill). A block with cells left unfilled must not be inserted.

// Placeholder is the value Debezium sends in place of a TOASTed value it
// cannot read (its unavailable.value.placeholder by default).
const Placeholder = "__debezium_unavailable_value"

// placeholderB64 is Placeholder as a bytea column carries it (JSON
// converter: base64 of the bytes).
var placeholderB64 = base64.StdEncoding.EncodeToString([]byte(Placeholder))

// isPlaceholder reports whether in is Debezium's placeholder in one of the
// forms it takes by column type: the text itself (text, varchar, json,
// jsonb, xml, ...), its bytes in base64 (bytea), a one-element array of
// the text (text[] and other arrays of text), or the text's bytes as an
// array of numbers (arrays of numbers).
func isPlaceholder(in *column.Value) bool {
	switch in.Kind {
	case column.String:
		return string(in.Bytes) == Placeholder || string(in.Bytes) == placeholderB64
	case column.Array:
		a, err := in.Tree.Array()
		if err != nil {
			return false
		}
		if len(a) == 1 && a[0].Type() == fastjson.TypeString {
			return string(a[0].GetStringBytes()) == Placeholder
		}
		if len(a) != len(Placeholder) {
			return false
		}
		for i, e := range a {
			if e.Type() != fastjson.TypeNumber {
				return false
			}
			if n, err := e.Int(); err != nil || n != int(Placeholder[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// oldKeyHeader is the header Debezium gives the create event of a row
// whose primary key an UPDATE changed: the old key's fields, as JSON.
const oldKeyHeader = "__debezium.oldkey"

// noteOldKey keeps, for the row being appended, the key r's oldKeyHeader
// names, converted as the key columns convert (once per row).
func (p *Plan) noteOldKey(b *column.Block, r *kgo.Record, keys []int) error {
	if b.HasOldKey() {
		return nil
	}
	var hdr []byte
	for _, h := range r.Headers {
		if h.Key == oldKeyHeader {
			hdr = h.Value
		}
	}
	if hdr == nil {
		return nil
	}
	v, err := p.oldKeys.ParseBytes(hdr)
	if err != nil {
		return fmt.Errorf("header %s is not JSON (%v): cannot find the row's earlier value", oldKeyHeader, err)
	}
	if pl := v.Get("payload"); pl != nil && v.Get("schema") != nil {
		v = pl
	}
	key := make([]any, len(keys))
	for j, k := range keys {
		f := v.Get(p.cols[k].Name)
		if f == nil {
			return fmt.Errorf("header %s lacks the key field %q: cannot find the row's earlier value", oldKeyHeader, p.cols[k].Name)
		}
		if key[j], err = column.ConvertJSON(p.types[k], f); err != nil {
			return fmt.Errorf("header %s, key field %q: %v", oldKeyHeader, p.cols[k].Name, err)
		}
	}
	b.SetOldKey(key)
	return nil
}
