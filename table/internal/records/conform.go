// Package records is the Arrow record plumbing of tables, with no
// knowledge of tables: conforming records to a schema, taking, merging and
// joining rows, and encoding key columns for matching.
package records

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/errs"
)

// Conform returns rec with exactly schema: columns are matched by
// position, cast with safe casts (no overflow, no truncation) where the
// types differ, and checked for nulls in non-nullable fields. Errors are
// errs.CodeSchemaValidation and name the field. rec is not released.
func Conform(ctx context.Context, rec arrow.RecordBatch, schema *arrow.Schema, mem memory.Allocator) (arrow.RecordBatch, error) {
	if int(rec.NumCols()) != schema.NumFields() {
		return nil, errs.Errorf(errs.CodeSchemaValidation, "got %d columns, want %d", rec.NumCols(), schema.NumFields())
	}
	if rec.Schema().Equal(schema) {
		rec.Retain()
		return rec, nil
	}
	ctx = compute.WithAllocator(ctx, mem)
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, f := range schema.Fields() {
		col := rec.Column(i)
		if arrow.TypeEqual(col.DataType(), f.Type) {
			col.Retain()
			cols[i] = col
		} else {
			out, err := compute.CastArray(ctx, col, compute.SafeCastOptions(f.Type))
			if err != nil {
				return nil, errs.Errorf(errs.CodeSchemaValidation, "field %q: value of type %s does not fit %s: %v", f.Name, col.DataType(), f.Type, err)
			}
			cols[i] = out
		}
		if !f.Nullable && cols[i].NullN() > 0 {
			return nil, errs.Errorf(errs.CodeSchemaValidation, "field %q is not nullable but got %d nulls", f.Name, cols[i].NullN())
		}
	}
	return array.NewRecordBatch(schema, cols, rec.NumRows()), nil
}

// CheckSameFields reports the first field of got that differs from want in
// name or type (nullability may differ: Conform checks the values).
func CheckSameFields(got, want *arrow.Schema) error {
	if got.NumFields() != want.NumFields() {
		return errs.Errorf(errs.CodeSchemaValidation, "data has %d fields, table has %d (%s)", got.NumFields(), want.NumFields(), FieldNames(want))
	}
	for i, f := range want.Fields() {
		g := got.Field(i)
		if g.Name != f.Name {
			return errs.Errorf(errs.CodeSchemaValidation, "field %d is %q, table has %q", i, g.Name, f.Name)
		}
		if !arrow.TypeEqual(g.Type, f.Type) {
			return errs.Errorf(errs.CodeSchemaValidation, "field %q has type %s, table has %s", f.Name, g.Type, f.Type)
		}
	}
	return nil
}

// FieldNames lists the names of schema's fields for a message.
func FieldNames(s *arrow.Schema) string {
	out := ""
	for i, f := range s.Fields() {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s %s", f.Name, f.Type)
	}
	return out
}

// conformReader wraps a reader whose records are conformed to schema.
type conformReader struct {
	array.RecordReader
	ctx    context.Context
	schema *arrow.Schema
	mem    memory.Allocator
	cur    arrow.RecordBatch
	err    error
}

// ConformReader adapts rdr to schema record by record (see Conform).
func ConformReader(ctx context.Context, rdr array.RecordReader, schema *arrow.Schema, mem memory.Allocator) array.RecordReader {
	return &conformReader{RecordReader: rdr, ctx: ctx, schema: schema, mem: mem}
}

func (c *conformReader) Schema() *arrow.Schema { return c.schema }
func (c *conformReader) Next() bool {
	if c.cur != nil {
		c.cur.Release()
		c.cur = nil
	}
	if c.err != nil || !c.RecordReader.Next() {
		return false
	}
	c.cur, c.err = Conform(c.ctx, c.RecordReader.RecordBatch(), c.schema, c.mem)
	return c.err == nil
}
func (c *conformReader) RecordBatch() arrow.RecordBatch { return c.cur }
func (c *conformReader) Record() arrow.RecordBatch      { return c.cur }
func (c *conformReader) Err() error {
	if c.err != nil {
		return c.err
	}
	return c.RecordReader.Err()
}
func (c *conformReader) Release() {
	if c.cur != nil {
		c.cur.Release()
		c.cur = nil
	}
	c.RecordReader.Release()
}

// NullableFrom reports whether the fields of schema from index n on are
// all nullable.
func NullableFrom(schema *arrow.Schema, n int) bool {
	for _, f := range schema.Fields()[n:] {
		if !f.Nullable {
			return false
		}
	}
	return true
}

// PadReader adapts rdr, whose fields are the leading fields of schema, to
// schema: the fields it lacks are all null. Release the answer (it holds
// a reference on rdr).
func PadReader(rdr array.RecordReader, schema *arrow.Schema, mem memory.Allocator) array.RecordReader {
	rdr.Retain()
	return &padReader{RecordReader: rdr, schema: schema, mem: mem}
}

type padReader struct {
	array.RecordReader
	schema *arrow.Schema
	mem    memory.Allocator
	cur    arrow.RecordBatch
}

func (p *padReader) Schema() *arrow.Schema { return p.schema }
func (p *padReader) Next() bool {
	if p.cur != nil {
		p.cur.Release()
		p.cur = nil
	}
	if !p.RecordReader.Next() {
		return false
	}
	r := p.RecordReader.RecordBatch()
	cols := append([]arrow.Array(nil), r.Columns()...)
	fields := append([]arrow.Field(nil), r.Schema().Fields()...)
	var made []arrow.Array
	for _, f := range p.schema.Fields()[len(cols):] {
		c := array.MakeArrayOfNull(p.mem, f.Type, int(r.NumRows()))
		made = append(made, c)
		cols = append(cols, c)
		fields = append(fields, f)
	}
	p.cur = array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, r.NumRows())
	for _, c := range made {
		c.Release()
	}
	return true
}
func (p *padReader) RecordBatch() arrow.RecordBatch { return p.cur }
func (p *padReader) Record() arrow.RecordBatch      { return p.cur }
func (p *padReader) Release() {
	if p.cur != nil {
		p.cur.Release()
		p.cur = nil
	}
	p.RecordReader.Release()
}
