package avrofmt

// The avro format's schema checks: a writer schema from the registry is
// refused, before it is compiled, when no record can be read with it
// (avro_limits.go and format's limits have the bounds).

import (
	"fmt"
	"math"

	"github.com/hamba/avro/v2"
)

// The Avro reader's bounds (format's limits.go has the ones every reader
// shares).
const (
	// maxAvroItems bounds the array and map items one Avro record may
	// hold.
	maxAvroItems = 1 << 20
	// maxAvroDepth bounds the nesting of Avro values (records, unions,
	// arrays, maps) in a record, and of types in a schema.
	maxAvroDepth = 128
	// maxAvroFixed bounds an Avro fixed type's size in a schema: no Kafka
	// record is larger (record sizes are 32-bit), so a larger fixed can
	// never be read. A smaller one larger than its record is refused
	// when a record is read (fits).
	maxAvroFixed = math.MaxInt32
)

// checkAvroSchema refuses a writer schema that nests types deeper than
// maxAvroDepth (a value that deep cannot be read), declares a fixed larger
// than maxAvroFixed (larger than any record), or has no finite value: its
// record always holds another record of its kind (recursion without a
// base case), so every record of it would nest until the depth bound.
func checkAvroSchema(s avro.Schema) error {
	w := avroWalk{seen: map[string]bool{}}
	if err := w.walk(s, 1); err != nil {
		return err
	}
	return w.finite(s)
}

// avroWalk visits each type of a schema once.
type avroWalk struct {
	seen map[string]bool
	// records in the order their walks ended: the records a record holds
	// come before it, unless they hold it too.
	records []*avro.RecordSchema
}

// walk checks s and the types in it, s being depth levels deep. A named
// type is walked where it is defined; its later uses are references.
func (w *avroWalk) walk(s avro.Schema, depth int) error {
	if depth > maxAvroDepth {
		return fmt.Errorf("the schema nests deeper than %d levels", maxAvroDepth)
	}
	var inner []avro.Schema
	switch t := s.(type) {
	case *avro.RecordSchema:
		if w.seen[t.FullName()] {
			return nil
		}
		w.seen[t.FullName()] = true
		defer func() { w.records = append(w.records, t) }()
		for _, f := range t.Fields() {
			inner = append(inner, f.Type())
		}
	case *avro.UnionSchema:
		inner = t.Types()
	case *avro.ArraySchema:
		inner = []avro.Schema{t.Items()}
	case *avro.MapSchema:
		inner = []avro.Schema{t.Values()}
	case *avro.FixedSchema:
		if t.Size() > maxAvroFixed {
			return fmt.Errorf("fixed %s is %d bytes, more than any record holds (%d)", t.FullName(), t.Size(), maxAvroFixed)
		}
	}
	for _, in := range inner {
		if err := w.walk(in, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// finite checks that the schema s has a value that ends: the records that
// can end are found by rounds until none is added. A record names only
// records defined before it (Avro's rule; the parser refuses a name used
// before its definition), whose walks ended before its own, or records
// that enclose it: each round settles at least the records waiting on
// enclosing ones one level further, so the rounds are at most the
// nesting bound (the walk's), not the number of records.
func (w *avroWalk) finite(s avro.Schema) error {
	ends := make(map[string]bool, len(w.records))
	for added := true; added; {
		added = false
		for _, r := range w.records {
			if !ends[r.FullName()] && fieldsEnd(r, ends) {
				ends[r.FullName()] = true
				added = true
			}
		}
	}
	if valueEnds(s, ends) {
		return nil
	}
	for _, r := range w.records {
		if !ends[r.FullName()] {
			return fmt.Errorf("record %s always holds another record of its kind (recursion without a base case): no value of the schema ends", r.FullName())
		}
	}
	return nil
}

// fieldsEnd reports whether every field of r has a value that ends, given
// the records known to end.
func fieldsEnd(r *avro.RecordSchema, ends map[string]bool) bool {
	for _, f := range r.Fields() {
		if !valueEnds(f.Type(), ends) {
			return false
		}
	}
	return true
}

// valueEnds reports whether s has a value that ends: a record known to,
// a union with such a branch, an array or map (which may be empty), or
// anything else.
func valueEnds(s avro.Schema, ends map[string]bool) bool {
	switch t := resolveRef(s).(type) {
	case *avro.RecordSchema:
		return ends[t.FullName()]
	case *avro.UnionSchema:
		for _, b := range t.Types() {
			if valueEnds(b, ends) {
				return true
			}
		}
		return false
	}
	return true
}
