package records

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// ReleaseAlso answers rdr, releasing also when it is released.
func ReleaseAlso(rdr, also array.RecordReader) array.RecordReader {
	return &releaseAlso{RecordReader: rdr, also: also}
}

// releaseAlso is a reader that releases another with itself.
type releaseAlso struct {
	array.RecordReader
	also array.RecordReader
}

func (r *releaseAlso) Release() {
	r.RecordReader.Release()
	r.also.Release()
}

// limitReader applies offset and limit to a stream, stopping early.
type limitReader struct {
	src           array.RecordReader
	schema        *arrow.Schema
	offset, limit int64 // limit < 0: none left to give
	cur           arrow.RecordBatch
}

// LimitReader applies offset and limit (0: none) to src, stopping early;
// it releases src.
func LimitReader(src array.RecordReader, schema *arrow.Schema, offset, limit int64) array.RecordReader {
	if limit <= 0 {
		limit = -1 // unlimited
	} else {
		limit++ // stored as remaining+1 so 0 means done
	}
	return &limitReader{src: src, schema: schema, offset: offset, limit: limit}
}

func (l *limitReader) Retain()                        { l.src.Retain() }
func (l *limitReader) Schema() *arrow.Schema          { return l.schema }
func (l *limitReader) RecordBatch() arrow.RecordBatch { return l.cur }
func (l *limitReader) Record() arrow.RecordBatch      { return l.cur }
func (l *limitReader) Err() error                     { return l.src.Err() }
func (l *limitReader) Release() {
	if l.cur != nil {
		l.cur.Release()
		l.cur = nil
	}
	l.src.Release()
}

func (l *limitReader) Next() bool {
	if l.cur != nil {
		l.cur.Release()
		l.cur = nil
	}
	for l.limit != 1 && l.src.Next() {
		r := l.src.RecordBatch()
		n := r.NumRows()
		if l.offset >= n {
			l.offset -= n
			continue
		}
		end := n
		if l.limit > 0 && end-l.offset > l.limit-1 {
			end = l.offset + l.limit - 1
		}
		l.cur = array.NewRecordBatch(l.schema, r.NewSlice(l.offset, end).Columns(), end-l.offset)
		if l.limit > 0 {
			l.limit -= end - l.offset
		}
		l.offset = 0
		return true
	}
	return false
}
