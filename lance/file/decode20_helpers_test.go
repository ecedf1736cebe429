package file

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/proto"

	"github.com/mvq-dev/mvq/lance/pb/file2pb"
	"github.com/mvq-dev/mvq/lance/pb/filepb"
	"github.com/mvq-dev/mvq/lance/schema"
)

// memFile20 is a whole 2.x file in memory, parsed just enough for the 2.0
// column reader: a test stand-in for the container.
type memFile20 struct {
	data    []byte
	version Version
	cols    []*file2pb.ColumnMetadata
	global  [][]byte
	schema  *arrow.Schema
	rows    uint64
}

func parseMemFile20(b []byte) (*memFile20, error) {
	if len(b) < 40 || string(b[len(b)-4:]) != "LANC" {
		return nil, fmt.Errorf("not a lance file")
	}
	le := binary.LittleEndian
	f := b[len(b)-40:]
	cmo, gbo := le.Uint64(f[8:]), le.Uint64(f[16:])
	ngb, ncol := uint64(le.Uint32(f[24:])), uint64(le.Uint32(f[28:]))
	m := &memFile20{data: b, version: Version{le.Uint16(f[32:]), le.Uint16(f[34:])}}
	slice := func(pos, size uint64) ([]byte, error) {
		if pos > uint64(len(b)) || size > uint64(len(b))-pos {
			return nil, fmt.Errorf("range %d+%d outside %d bytes", pos, size, len(b))
		}
		return b[pos : pos+size], nil
	}
	tbl, err := slice(gbo, 16*ngb)
	if err != nil {
		return nil, err
	}
	for i := uint64(0); i < ngb; i++ {
		g, err := slice(le.Uint64(tbl[16*i:]), le.Uint64(tbl[16*i+8:]))
		if err != nil {
			return nil, err
		}
		m.global = append(m.global, g)
	}
	tbl, err = slice(cmo, 16*ncol)
	if err != nil {
		return nil, err
	}
	for i := uint64(0); i < ncol; i++ {
		raw, err := slice(le.Uint64(tbl[16*i:]), le.Uint64(tbl[16*i+8:]))
		if err != nil {
			return nil, err
		}
		var cm file2pb.ColumnMetadata
		if err := proto.Unmarshal(raw, &cm); err != nil {
			return nil, err
		}
		m.cols = append(m.cols, &cm)
	}
	if len(m.global) > 0 {
		var fd filepb.FileDescriptor
		if err := proto.Unmarshal(m.global[0], &fd); err != nil {
			return nil, err
		}
		m.rows = fd.Length
		s, err := schema.ToArrow(fd.GetSchema().GetFields(), fd.GetSchema().GetMetadata())
		if err != nil {
			return nil, err
		}
		m.schema = s
	}
	return m, nil
}

func (m *memFile20) numPages(col int) (int, error) {
	if col < 0 || col >= len(m.cols) {
		return 0, fmt.Errorf("column %d of %d", col, len(m.cols))
	}
	return len(m.cols[col].Pages), nil
}

func (m *memFile20) pageInfo(col, page int) (uint64, []byte, error) {
	p := m.cols[col].Pages[page]
	return p.Length, p.GetEncoding().GetDirect().GetEncoding(), nil
}

func (m *memFile20) pageBuffers(_ context.Context, col, page int) (*pageBufs20, error) {
	c := m.cols[col]
	p := c.Pages[page]
	bufs := &pageBufs20{file: m.global}
	for i := range p.BufferOffsets {
		if i >= len(p.BufferSizes) {
			return nil, fmt.Errorf("page buffer %d without a size", i)
		}
		pos, size := p.BufferOffsets[i], p.BufferSizes[i]
		if pos > uint64(len(m.data)) || size > uint64(len(m.data))-pos {
			return nil, fmt.Errorf("page buffer outside the file")
		}
		bufs.page = append(bufs.page, m.data[pos:pos+size])
	}
	for i := range c.BufferOffsets {
		pos, size := c.BufferOffsets[i], c.BufferSizes[i]
		if pos > uint64(len(m.data)) || size > uint64(len(m.data))-pos {
			return nil, fmt.Errorf("column buffer outside the file")
		}
		bufs.column = append(bufs.column, m.data[pos:pos+size])
	}
	return bufs, nil
}

func (m *memFile20) types() []arrow.DataType {
	out := make([]arrow.DataType, m.schema.NumFields())
	for i, f := range m.schema.Fields() {
		out[i] = f.Type
	}
	return out
}
