package arrowjson

import (
	"encoding/binary"
	"fmt"
)

// Arrow IPC metadata is a FlatBuffer, and arrow-go reads it without bounds
// checks: a vector length taken from the bytes sizes a Go slice (one
// mutated byte asked for 500 MiB), and offsets that share a subtree make
// a 600-byte schema describe billions of fields. verifyMessage checks a
// message's metadata against the Arrow format (Message.fbs, Schema.fbs)
// before arrow-go touches it: every table, string and vector lies inside
// the buffer, union types are known, nesting is bounded, and the number of
// tables reached is at most one per 4 bytes of metadata, so nothing decoded
// from it can be larger than a small multiple of its size.

type fbKind uint8

const (
	fbScalar      fbKind = iota // inline scalar of size bytes
	fbString                    // offset to a string
	fbVector                    // offset to a vector of size-byte scalars or structs
	fbSubtable                  // offset to a table
	fbTableVector               // offset to a vector of table offsets
	fbUnion                     // offset to a table whose layout the previous slot selects
)

type fbField struct {
	kind  fbKind
	size  int
	table *fbTable
	union map[uint8]*fbTable
}

type fbTable struct {
	name   string
	fields []fbField
}

func scalar(n int) fbField                 { return fbField{kind: fbScalar, size: n} }
func vectorOf(n int) fbField               { return fbField{kind: fbVector, size: n} }
func tableOf(t *fbTable) fbField           { return fbField{kind: fbSubtable, table: t} }
func tablesOf(t *fbTable) fbField          { return fbField{kind: fbTableVector, table: t} }
func unionOf(u map[uint8]*fbTable) fbField { return fbField{kind: fbUnion, union: u} }

var stringField = fbField{kind: fbString}

var (
	fbEmpty      = &fbTable{name: "type"}
	fbKeyValue   = &fbTable{name: "KeyValue", fields: []fbField{stringField, stringField}}
	fbInt        = &fbTable{name: "Int", fields: []fbField{scalar(4), scalar(1)}}
	fbField_     = &fbTable{name: "Field"}
	fbSchema     = &fbTable{name: "Schema", fields: []fbField{scalar(2), tablesOf(fbField_), tablesOf(fbKeyValue), vectorOf(8)}}
	fbDictEnc    = &fbTable{name: "DictionaryEncoding", fields: []fbField{scalar(8), tableOf(fbInt), scalar(1), scalar(2)}}
	fbBodyCompr  = &fbTable{name: "BodyCompression", fields: []fbField{scalar(1), scalar(1)}}
	fbRecordBat  = &fbTable{name: "RecordBatch", fields: []fbField{scalar(8), vectorOf(16), vectorOf(16), tableOf(fbBodyCompr), vectorOf(8)}}
	fbDictBatch  = &fbTable{name: "DictionaryBatch", fields: []fbField{scalar(8), tableOf(fbRecordBat), scalar(1)}}
	fbMessage    = &fbTable{name: "Message"}
	fbArrowTypes = map[uint8]*fbTable{}
)

func init() {
	unit := &fbTable{name: "type", fields: []fbField{scalar(2)}}
	oneInt := &fbTable{name: "type", fields: []fbField{scalar(4)}}
	for id := uint8(1); id <= 26; id++ {
		fbArrowTypes[id] = fbEmpty
	}
	fbArrowTypes[2] = fbInt
	fbArrowTypes[3] = unit                                                                          // FloatingPoint
	fbArrowTypes[7] = &fbTable{name: "Decimal", fields: []fbField{scalar(4), scalar(4), scalar(4)}} // Decimal
	fbArrowTypes[8] = unit                                                                          // Date
	fbArrowTypes[9] = &fbTable{name: "Time", fields: []fbField{scalar(2), scalar(4)}}               // Time
	fbArrowTypes[10] = &fbTable{name: "Timestamp", fields: []fbField{scalar(2), stringField}}       // Timestamp
	fbArrowTypes[11] = unit                                                                         // Interval
	fbArrowTypes[14] = &fbTable{name: "Union", fields: []fbField{scalar(2), vectorOf(4)}}           // Union
	fbArrowTypes[15] = oneInt                                                                       // FixedSizeBinary
	fbArrowTypes[16] = oneInt                                                                       // FixedSizeList
	fbArrowTypes[17] = &fbTable{name: "Map", fields: []fbField{scalar(1)}}                          // Map
	fbArrowTypes[18] = unit                                                                         // Duration
	fbField_.fields = []fbField{stringField, scalar(1), scalar(1), unionOf(fbArrowTypes), tableOf(fbDictEnc), tablesOf(fbField_), tablesOf(fbKeyValue)}
	fbMessage.fields = []fbField{scalar(2), scalar(1), unionOf(map[uint8]*fbTable{1: fbSchema, 2: fbDictBatch, 3: fbRecordBat}), scalar(8), tablesOf(fbKeyValue)}
}

const fbMaxDepth = 64

type fbVerifier struct {
	buf    []byte
	tables int // tables left to visit
}

// verifyMessage checks buf as an Arrow IPC Message FlatBuffer.
func verifyMessage(buf []byte) error {
	v := &fbVerifier{buf: buf, tables: len(buf)/4 + 1}
	if len(buf) < 4 {
		return fmt.Errorf("metadata of %d bytes", len(buf))
	}
	root := int64(binary.LittleEndian.Uint32(buf))
	return v.table(root, fbMessage, 0)
}

func (v *fbVerifier) u32(at int64) (int64, error) {
	if at < 0 || at+4 > int64(len(v.buf)) {
		return 0, fmt.Errorf("offset %d out of range", at)
	}
	return int64(binary.LittleEndian.Uint32(v.buf[at:])), nil
}

func (v *fbVerifier) u16(at int64) (int64, error) {
	if at < 0 || at+2 > int64(len(v.buf)) {
		return 0, fmt.Errorf("offset %d out of range", at)
	}
	return int64(binary.LittleEndian.Uint16(v.buf[at:])), nil
}

func (v *fbVerifier) table(pos int64, t *fbTable, depth int) error {
	if depth > fbMaxDepth {
		return fmt.Errorf("%s: nested more than %d deep", t.name, fbMaxDepth)
	}
	if v.tables--; v.tables < 0 {
		return fmt.Errorf("%s: more tables than %d bytes of metadata can hold", t.name, len(v.buf))
	}
	soff, err := v.u32(pos)
	if err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	vt := pos - int64(int32(uint32(soff)))
	vtSize, err := v.u16(vt)
	if err != nil {
		return fmt.Errorf("%s vtable: %w", t.name, err)
	}
	objSize, err := v.u16(vt + 2)
	if err != nil {
		return fmt.Errorf("%s vtable: %w", t.name, err)
	}
	if vtSize < 4 || vtSize%2 != 0 || vt+vtSize > int64(len(v.buf)) {
		return fmt.Errorf("%s: vtable size %d out of range", t.name, vtSize)
	}
	if objSize < 4 || pos+objSize > int64(len(v.buf)) {
		return fmt.Errorf("%s: size %d out of range", t.name, objSize)
	}
	var unionType uint8
	for i, f := range t.fields {
		slot := 4 + 2*int64(i)
		if slot+2 > vtSize {
			break
		}
		off, _ := v.u16(vt + slot)
		if off == 0 {
			if f.kind == fbScalar && f.size == 1 {
				unionType = 0
			}
			continue
		}
		width := int64(4)
		if f.kind == fbScalar {
			width = int64(f.size)
		}
		if off < 4 || off+width > objSize {
			return fmt.Errorf("%s field %d: offset %d out of the table", t.name, i, off)
		}
		at := pos + off
		if f.kind == fbScalar {
			if f.size == 1 {
				unionType = v.buf[at]
			}
			continue
		}
		rel, _ := v.u32(at)
		target := at + rel
		if err := v.field(target, f, unionType, depth); err != nil {
			return fmt.Errorf("%s field %d: %w", t.name, i, err)
		}
	}
	return nil
}

func (v *fbVerifier) field(target int64, f fbField, unionType uint8, depth int) error {
	switch f.kind {
	case fbSubtable:
		return v.table(target, f.table, depth+1)
	case fbUnion:
		if unionType == 0 {
			return nil
		}
		t, ok := f.union[unionType]
		if !ok {
			return fmt.Errorf("unknown union type %d", unionType)
		}
		return v.table(target, t, depth+1)
	}
	n, err := v.u32(target)
	if err != nil {
		return err
	}
	elem := int64(f.size)
	switch f.kind {
	case fbString:
		elem = 1
	case fbTableVector:
		elem = 4
	}
	if target+4+n*elem > int64(len(v.buf)) {
		return fmt.Errorf("vector of %d elements runs past the metadata", n)
	}
	if f.kind != fbTableVector {
		return nil
	}
	for i := int64(0); i < n; i++ {
		at := target + 4 + 4*i
		rel, _ := v.u32(at)
		if err := v.table(at+rel, f.table, depth+1); err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	return nil
}
