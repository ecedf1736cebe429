package table

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/google/uuid"

	"github.com/mvq-dev/mvq/arrowjson"
	"github.com/mvq-dev/mvq/errs"
	lancefile "github.com/mvq-dev/mvq/lance/file"
	"github.com/mvq-dev/mvq/table/internal/datafile"
)

// RowAddrColumn is the name of the row address column Scan can add.
const RowAddrColumn = "_rowaddr"

// encodeSchema and decodeSchema store schemas in manifests as base64
// Arrow IPC (the encoding the API's output_schema uses too).
func encodeSchema(s *arrow.Schema) (string, error) { return arrowjson.EncodeIPCSchema(s) }

func decodeSchema(enc string) (*arrow.Schema, error) { return arrowjson.DecodeIPCSchema(enc) }

// EncodeSchema renders a schema the way manifests store it.
func EncodeSchema(s *arrow.Schema) (string, error) { return encodeSchema(s) }

// checkSchema rejects schemas a table cannot hold: no fields, empty or
// duplicate names, names reserved for internals.
func checkSchema(s *arrow.Schema) error {
	if s == nil || s.NumFields() == 0 {
		return errs.Errorf(errs.CodeInvalidInput, "schema has no fields")
	}
	seen := map[string]bool{}
	for _, k := range s.Metadata().Keys() {
		if !utf8.ValidString(k) {
			return errs.Errorf(errs.CodeSchemaValidation, "schema metadata key %q is not valid UTF-8", k)
		}
	}
	for _, f := range s.Fields() {
		if f.Name == "" {
			return errs.Errorf(errs.CodeInvalidInput, "schema has a field with an empty name")
		}
		if err := validNames(f); err != nil {
			return err
		}
		if seen[f.Name] {
			return errs.Errorf(errs.CodeInvalidInput, "schema has field %q twice", f.Name)
		}
		if f.Name == RowAddrColumn {
			return errs.Errorf(errs.CodeInvalidInput, "field name %q is reserved", f.Name)
		}
		if err := storable(f.Type); err != nil {
			return errs.Errorf(errs.CodeSchemaValidation, "field %q: %v", f.Name, err)
		}
		seen[f.Name] = true
	}
	return nil
}

// storable accepts the types tables store and SQL reads: booleans,
// integers, floats (not float16), strings, binary, dates, timestamps,
// decimals, and lists and structs of these.
func storable(t arrow.DataType) error {
	switch t.ID() {
	case arrow.BOOL, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64, arrow.FLOAT32, arrow.FLOAT64,
		arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY,
		arrow.DATE32, arrow.DATE64, arrow.TIMESTAMP, arrow.DECIMAL128:
		return nil
	case arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST:
		return storable(t.(arrow.ListLikeType).Elem())
	case arrow.STRUCT:
		if t.(*arrow.StructType).NumFields() == 0 {
			// Parquet has no empty groups, and rows of it would carry no bytes.
			return fmt.Errorf("a struct needs at least one field")
		}
		for _, f := range t.(*arrow.StructType).Fields() {
			if err := storable(f.Type); err != nil {
				return fmt.Errorf("%s: %w", f.Name, err)
			}
		}
		return nil
	}
	return fmt.Errorf("type %s is not supported", t)
}

// writerProps are the properties of every data file (datafile.WriterProps).
func (c *Catalog) writerProps(noDict ...string) (*parquet.WriterProperties, pqarrow.ArrowWriterProperties) {
	return datafile.WriterProps(c.opts.RowGroupRows, c.opts.Mem, noDict...)
}

// WriteFile writes records as one new data file under data/ and returns
// its fragment (ID unassigned: the commit assigns it).
func (t *Table) WriteFile(ctx context.Context, schema *arrow.Schema, recs []arrow.RecordBatch) (Fragment, error) {
	return t.WriteFileAt(ctx, "data/"+uuid.NewString()+t.c.DataExt(), schema, recs)
}

// DataExt is the extension of the data files the catalog writes: ".lance"
// in the Lance format, else ".parquet". WriteFileAt writes the format its
// name's extension says.
func (c *Catalog) DataExt() string {
	if c.opts.Format == FormatLance {
		return datafile.LanceExt
	}
	return ".parquet"
}

// WriteFileAt writes records as the data file rel (under data/), replacing
// a file of that name: callers with deterministic names (a retried refresh
// step) rewrite their own output. Columns in noDict are written without
// dictionary encoding (Parquet). The fragment's ID is unassigned. A name
// ending in .lance is a Lance 2.1 file, unless the Lance writer cannot
// hold the schema: then it is Parquet under the name with .parquet.
func (t *Table) WriteFileAt(ctx context.Context, rel string, schema *arrow.Schema, recs []arrow.RecordBatch, noDict ...string) (Fragment, error) {
	return t.WriteFileWith(ctx, rel, schema, recs, FileOptions{NoDict: noDict})
}

// FileOptions tunes how WriteFileWith encodes a data file.
type FileOptions struct {
	// NoDict are columns a Parquet file skips dictionary encoding for.
	NoDict []string
	// FSST, for a Lance 2.1 file, shares trained FSST symbol tables with
	// the other files written with it (files of one schema only).
	FSST *lancefile.FSSTTables
	// DeferSync leaves a file:// file unsynced: the caller makes it
	// durable with SyncFilesDropBehind before a version names it (a
	// writer holding scarce CPU gives it up first; a sync waits on the
	// disk).
	DeferSync bool
}

// SyncFilesDropBehind makes the data files rels (Fragment.Path), written
// with FileOptions.DeferSync, durable, and then drops their pages from the
// page cache: the files a work item writes, which its process does not
// read back (see warehouse.SyncDropBehind).
func (t *Table) SyncFilesDropBehind(ctx context.Context, rels []string) error {
	keys := make([]string, len(rels))
	for i, rel := range rels {
		keys[i] = t.key + rel
	}
	return t.c.wh.SyncDropBehind(keys)
}

// WriteFileWith is WriteFileAt with options.
func (t *Table) WriteFileWith(ctx context.Context, rel string, schema *arrow.Schema, recs []arrow.RecordBatch, o FileOptions) (Fragment, error) {
	var rows, size int64
	var err error
	write := t.c.wh.WriteFrom
	if o.DeferSync {
		write = t.c.wh.WriteFromUnsynced
	}
	if strings.HasSuffix(rel, datafile.LanceExt) && datafile.LanceWritable(schema) != nil {
		// A schema the Lance writer cannot hold stays Parquet, which only
		// mvq reads.
		rel = strings.TrimSuffix(rel, datafile.LanceExt) + ".parquet"
	}
	fileVersion := ""
	if strings.HasSuffix(rel, datafile.LanceExt) {
		v := lancefile.V2_1
		if t.storageVersion(ctx) == "2.0" && datafile.LanceWritableVersion(schema, lancefile.V2_0) == nil {
			// A dataset created as 2.0 stays 2.0: LanceDB writes its
			// files in the dataset's version too.
			v, fileVersion = lancefile.V2_0, "2.0"
		}
		err = write(ctx, t.key+rel, func(w io.Writer) (err error) {
			rows, size, err = datafile.WriteLanceVersion(w, schema, recs, v, o.FSST)
			return err
		})
	} else {
		props, aprops := t.c.writerProps(o.NoDict...)
		err = write(ctx, t.key+rel, func(w io.Writer) (err error) {
			rows, size, err = datafile.Write(w, schema, recs, props, aprops, t.c.opts.Mem)
			return err
		})
	}
	if err != nil {
		return Fragment{}, err
	}
	return Fragment{Path: rel, Rows: rows, Bytes: size, written: schema, FileVersion: fileVersion}, nil
}

// storageVersion is the Lance data storage version of the table's latest
// version ("2.1" when it has none yet), read once per handle: a dataset
// keeps the version it was created with.
func (t *Table) storageVersion(ctx context.Context) string {
	if t.storage != nil {
		if v := t.storage.Load(); v != nil {
			return *v
		}
	}
	v := lanceStorageVers
	m, err := t.Load(ctx, 0)
	switch {
	case err == nil && m.lance:
		v = m.StorageVersion()
	case err != nil && errs.CodeOf(err) != errs.CodeTableNotFound:
		return v // not kept: a later write asks again
	}
	if t.storage != nil {
		t.storage.Store(&v)
	}
	return v
}

// WriteFragments drains rdr into data files of at most maxRows rows each
// (0: the catalog default), written in parallel. Records must have schema.
// Nothing is committed: on error the files written are orphans, invisible
// to readers.
func (t *Table) WriteFragments(ctx context.Context, schema *arrow.Schema, rdr array.RecordReader, maxRows int) ([]Fragment, error) {
	if maxRows <= 0 {
		maxRows = t.c.opts.MaxRowsPerFragment
	}
	if rdr == nil {
		return nil, nil
	}
	return datafile.WriteAll(ctx, schema, rdr, maxRows, func(ctx context.Context, recs []arrow.RecordBatch) (f Fragment, err error) {
		err = Recover("write data file", func() (err error) {
			f, err = t.WriteFile(ctx, schema, recs)
			return err
		})
		return f, err
	})
}

// Recover runs fn and turns a panic in it into an internal error (what
// names the step; the panic value and stack are in the cause, which is
// logged, never shown). Every goroutine that handles request or stored
// data runs its work through Recover: a panic outside a request's own
// goroutine would end the process.
func Recover(what string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &errs.Error{Code: errs.CodeInternal, Message: what + " failed", Err: fmt.Errorf("panic: %v\n%s", p, debug.Stack())}
		}
	}()
	return fn()
}

// ReadFragment reads one data file whole into memory and returns its
// records, restricted to the given top-level field indices (nil: all).
func (t *Table) ReadFragment(ctx context.Context, f Fragment, fields []int, mem memory.Allocator) ([]arrow.RecordBatch, error) {
	r, err := t.OpenFragment(ctx, f, FragmentReadOptions{WholeFileBytes: -1, Parallel: true, Mem: mem})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Read(ctx, fields, nil, 1<<16)
}

// validNames refuses a field (or a field inside it) whose name or
// metadata key is not UTF-8: Lance manifests store them as protobuf
// strings.
func validNames(f arrow.Field) error {
	if !utf8.ValidString(f.Name) {
		return errs.Errorf(errs.CodeSchemaValidation, "field name %q is not valid UTF-8", f.Name)
	}
	for _, k := range f.Metadata.Keys() {
		if !utf8.ValidString(k) {
			return errs.Errorf(errs.CodeSchemaValidation, "field %q: metadata key %q is not valid UTF-8", f.Name, k)
		}
	}
	switch t := f.Type.(type) {
	case *arrow.StructType:
		for _, c := range t.Fields() {
			if err := validNames(c); err != nil {
				return err
			}
		}
	case arrow.ListLikeType:
		return validNames(t.ElemField())
	}
	return nil
}
