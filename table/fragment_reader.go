package table

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"

	"github.com/mvq-dev/mvq/table/internal/datafile"
)

// DefaultWholeFileBytes is FragmentReadOptions.WholeFileBytes's default.
const DefaultWholeFileBytes = 4 << 20

// FragmentReadOptions tunes how OpenFragment fetches and decodes a file.
type FragmentReadOptions struct {
	// WholeFileBytes: a data file of known size up to this is fetched in
	// one request; a larger one, or one of unknown size (Bytes 0), is
	// opened for ranged reads, so only its footer and the column chunks of
	// the row groups read are fetched. 0: DefaultWholeFileBytes; negative:
	// always one request.
	WholeFileBytes int64
	// Buffered reads column chunks through a 1 MiB buffered stream instead
	// of whole (bounds memory on large row groups read in small batches).
	Buffered bool
	// Parallel decodes the columns of a batch concurrently.
	Parallel bool
	// Label prefixes the messages of the reader's errors (e.g. the table's
	// name and a space).
	Label string
	// Mem allocates Arrow buffers. Default the catalog's.
	Mem memory.Allocator
	// KeepFSST keeps the FSST codes of a Lance file's strings beside the
	// arrays read, for a writer of substrings of them (lance/file
	// Reader.KeepFSST); they live as long as the arrays.
	KeepFSST bool
}

// FragmentReader reads one data file of a table: its row groups, and the
// records of chosen columns over chosen row groups or a row range, in the
// table's (not the file's storage) types (table/internal/datafile). Every
// error it returns is an invalid-table-state error naming the file. Close
// it when done; it is not safe for concurrent use.
type FragmentReader = datafile.Reader

// OpenFragment opens data file f of t and reads its footer.
func (t *Table) OpenFragment(ctx context.Context, f Fragment, o FragmentReadOptions) (*FragmentReader, error) {
	if o.WholeFileBytes == 0 {
		o.WholeFileBytes = DefaultWholeFileBytes
	}
	if o.Mem == nil {
		o.Mem = t.c.opts.Mem
	}
	label := fmt.Sprintf("%sfragment %d (%s)", o.Label, f.ID, f.Path)
	if strings.HasSuffix(f.Path, datafile.LanceExt) {
		return t.openLanceFragment(ctx, f, o, label)
	}
	if f.HasDeletions() {
		return nil, datafile.Fail(label, "unreadable", fmt.Errorf("a deletion file over a Parquet data file"))
	}
	var src parquet.ReaderAtSeeker
	var closer io.Closer
	if o.WholeFileBytes < 0 || (f.Bytes > 0 && f.Bytes <= o.WholeFileBytes) {
		data, err := t.c.wh.Read(ctx, t.key+f.Path)
		if err != nil {
			return nil, datafile.Fail(label, "unreadable", err)
		}
		src = bytes.NewReader(data)
	} else {
		obj, err := t.c.wh.Open(ctx, t.key+f.Path)
		if err != nil {
			return nil, datafile.Fail(label, "unreadable", err)
		}
		closer = obj
		src = datafile.NewReaderAt(obj, obj.Size())
	}
	return datafile.Open(src, closer, datafile.Options{Buffered: o.Buffered, Parallel: o.Parallel, Label: label, Mem: o.Mem, Fields: f.FileFields, KeepFSST: o.KeepFSST})
}

// openLanceFragment opens a Lance data file: whole when small (as a
// Parquet one), else for ranged reads.
func (t *Table) openLanceFragment(ctx context.Context, f Fragment, o FragmentReadOptions, label string) (*FragmentReader, error) {
	opts := datafile.Options{Buffered: o.Buffered, Parallel: o.Parallel, Label: label, Mem: o.Mem, Fields: f.FileFields, KeepFSST: o.KeepFSST}
	if f.HasDeletions() {
		del, err := t.Deleted(ctx, f)
		if err != nil {
			return nil, err
		}
		opts.Deleted = del
	}
	if f.Parts != "" {
		if err := t.lanceParts(ctx, f, o, label, &opts); err != nil {
			return nil, err
		}
	}
	src, err := t.lanceSource(ctx, f.Path, f.Bytes, o)
	if err != nil {
		datafile.CloseSources(opts.More)
		return nil, datafile.Fail(label, "unreadable", err)
	}
	return datafile.OpenLance(src.Src, src.Size, src.Closer, opts)
}

// lanceSource fetches a Lance data file of the table: whole when small
// (as a Parquet one), else opened for ranged reads.
func (t *Table) lanceSource(ctx context.Context, rel string, size int64, o FragmentReadOptions) (datafile.Source, error) {
	if o.WholeFileBytes < 0 || (size > 0 && size <= o.WholeFileBytes) {
		data, err := t.c.wh.Read(ctx, t.key+rel)
		if err != nil {
			return datafile.Source{}, err
		}
		return datafile.Source{Src: bytes.NewReader(data), Size: int64(len(data))}, nil
	}
	obj, err := t.c.wh.Open(ctx, t.key+rel)
	if err != nil {
		return datafile.Source{}, err
	}
	return datafile.Source{Src: datafile.NewReaderAt(obj, obj.Size()), Size: obj.Size(), Closer: obj}, nil
}

// lanceParts sets the layout of a fragment of several data files (or of
// columns out of the file's order) into opts, opening its other files.
func (t *Table) lanceParts(ctx context.Context, f Fragment, o FragmentReadOptions, label string, opts *datafile.Options) error {
	ps, err := f.parts()
	if err != nil {
		return datafile.Fail(label, "corrupt", err)
	}
	ex, err := f.extraFiles()
	if err != nil {
		return datafile.Fail(label, "corrupt", err)
	}
	for _, p := range ps {
		opts.Parts = append(opts.Parts, datafile.Part{File: p.file, Start: p.start})
	}
	for _, e := range ex {
		src, err := t.lanceSource(ctx, e.Path, e.Bytes, o)
		if err != nil {
			datafile.CloseSources(opts.More)
			opts.More = nil
			return datafile.Fail(label, "unreadable", fmt.Errorf("%s: %w", e.Path, err))
		}
		opts.More = append(opts.More, src)
	}
	return nil
}
