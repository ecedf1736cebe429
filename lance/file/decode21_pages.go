package file

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/mvq-dev/mvq/lance/pb/enc21pb"
)

// --- mini-block layout ---

// miniChunk locates one mini-block chunk in the value buffer.
type miniChunk struct {
	off, size uint64 // within the value buffer
	items     int    // values in the chunk
	firstItem uint64 // items before the chunk in the page
	// From the repetition index (lists only): rows that start in the chunk,
	// the first of them, whether the chunk begins by finishing a row of the
	// previous chunk (preamble) and ends with a row the next one finishes.
	starts, firstRow  uint64
	preamble, trailer bool
}

type miniPage struct {
	r          *Reader
	l          *enc21pb.MiniBlockLayout
	values     BufferRef
	chunks     []miniChunk
	dict       *vblock
	hasRep     bool
	hasDef     bool
	numBuffers int
	mr, mvd    uint16
	// the last decoded chunk, reused by adjacent row ranges
	lastIdx          int
	span             []byte // prefetched value bytes from spanOff
	spanOff          uint64
	lastRep, lastDef []uint16
	lastVals         *vblock
}

const miniBlockAlign = 8

func pad8(n int) int { return (n + miniBlockAlign - 1) &^ (miniBlockAlign - 1) }

func (r *Reader) decodeMiniBlockPage(p *PageInfo, l *enc21pb.MiniBlockLayout, ranges []rowRange) ([]levelSlice, error) {
	if err := checkLayers(l.GetLayers()); err != nil {
		return nil, err
	}
	if len(p.Buffers) < 2 {
		return nil, corruptf("mini-block page with %d buffers", len(p.Buffers))
	}
	if l.GetValueCompression() == nil {
		return nil, corruptf("mini-block page without value compression")
	}
	mp := &miniPage{r: r, l: l, values: p.Buffers[1], hasRep: l.GetRepCompression() != nil,
		hasDef: l.GetDefCompression() != nil, lastIdx: -1,
		mr: maxRep(l.GetLayers()), mvd: maxVisibleDef(l.GetLayers())}
	if l.GetNumBuffers() > 64 {
		return nil, corruptf("mini-block page with %d value buffers", l.GetNumBuffers())
	}
	mp.numBuffers = int(l.GetNumBuffers())
	if mp.mr > 0 && !mp.hasRep {
		return nil, corruptf("list layers without repetition levels")
	}
	meta, err := r.c.ReadBuffer(p.Buffers[0])
	if err != nil {
		return nil, err
	}
	if len(meta)%2 != 0 {
		return nil, corruptf("chunk metadata of %d bytes", len(meta))
	}
	numItems := l.GetNumItems()
	nChunks := len(meta) / 2
	if numItems > uint64(nChunks)*maxChunkValues {
		return nil, corruptf("%d items in %d chunks", numItems, nChunks)
	}
	mp.chunks = make([]miniChunk, nChunks)
	var off, items uint64
	for i := range mp.chunks {
		w := binary.LittleEndian.Uint16(meta[2*i:])
		size := (uint64(w>>4) + 1) * miniBlockAlign
		var n uint64
		if i < nChunks-1 {
			n = 1 << (w & 15)
		} else {
			if items > numItems {
				return nil, corruptf("chunks hold more than the page's %d items", numItems)
			}
			n = numItems - items
		}
		if n > maxChunkValues {
			return nil, corruptf("chunk of %d items", n)
		}
		mp.chunks[i] = miniChunk{off: off, size: size, items: int(n), firstItem: items}
		off += size
		items += n
	}
	if off > mp.values.Size {
		return nil, corruptf("chunks of %d bytes in a %d-byte value buffer", off, mp.values.Size)
	}
	if items != numItems {
		return nil, corruptf("chunks hold %d items, the page %d", items, numItems)
	}
	next := 2
	if l.GetDictionary() != nil {
		if len(p.Buffers) <= next {
			return nil, corruptf("dictionary page without a dictionary buffer")
		}
		buf, err := r.c.ReadBuffer(p.Buffers[next])
		if err != nil {
			return nil, err
		}
		nd := l.GetNumDictionaryItems()
		if nd > 8*uint64(len(buf))+1024 {
			return nil, corruptf("%d dictionary items in %d bytes", nd, len(buf))
		}
		if mp.dict, err = decodeBlock(l.GetDictionary(), buf, int(nd)); err != nil {
			return nil, err
		}
		next++
	}
	if mp.hasRep {
		if d := l.GetRepetitionIndexDepth(); d > 0 {
			if len(p.Buffers) <= next {
				return nil, corruptf("no repetition index buffer")
			}
			ref := p.Buffers[len(p.Buffers)-1]
			stride := uint64(d) + 1
			if d > 16 || ref.Size != uint64(nChunks)*stride*8 {
				return nil, corruptf("repetition index of %d bytes for %d chunks of depth %d", ref.Size, nChunks, d)
			}
			idx, err := r.c.ReadBuffer(ref)
			if err != nil {
				return nil, err
			}
			var first uint64
			pre := false
			for i := range mp.chunks {
				ends := binary.LittleEndian.Uint64(idx[8*stride*uint64(i):])
				partial := binary.LittleEndian.Uint64(idx[8*stride*uint64(i)+8:])
				c := &mp.chunks[i]
				c.trailer = partial > 0
				c.preamble = pre
				starts := ends
				if c.trailer {
					starts++
				}
				if pre {
					if starts == 0 {
						return nil, corruptf("repetition index: chunk %d has a preamble but no row end", i)
					}
					starts--
				}
				if starts > 1<<17 {
					return nil, corruptf("repetition index: chunk %d starts %d rows", i, starts)
				}
				c.starts, c.firstRow = starts, first
				first += starts
				pre = c.trailer
			}
			if first != p.NumRows {
				return nil, corruptf("repetition index counts %d rows, the page %d", first, p.NumRows)
			}
		}
	} else if numItems != p.NumRows {
		return nil, corruptf("page of %d rows holds %d items", p.NumRows, numItems)
	}
	if len(ranges) == 1 {
		// One range (a scan): read the bytes of all its chunks at once.
		if err := mp.prefetch(ranges[0]); err != nil {
			return nil, err
		}
	}
	var out []levelSlice
	for _, rg := range ranges {
		got, err := mp.readRows(p, rg.start, rg.end)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

// prefetch reads the value bytes of the chunks that hold rows rg in one
// read, for chunk to slice.
func (mp *miniPage) prefetch(rg rowRange) error {
	first, last := 0, len(mp.chunks)-1
	switch {
	case !mp.hasRep:
		first = sort.Search(len(mp.chunks), func(i int) bool {
			return mp.chunks[i].firstItem+uint64(mp.chunks[i].items) > rg.start
		})
		last = sort.Search(len(mp.chunks), func(i int) bool {
			return mp.chunks[i].firstItem >= rg.end
		}) - 1
	case mp.l.GetRepetitionIndexDepth() > 0:
		first = sort.Search(len(mp.chunks), func(i int) bool {
			return mp.chunks[i].firstRow+mp.chunks[i].starts > rg.start
		})
		last = sort.Search(len(mp.chunks), func(i int) bool {
			return mp.chunks[i].firstRow+mp.chunks[i].starts > rg.end-1
		})
		for last+1 < len(mp.chunks) && last < len(mp.chunks) && mp.chunks[last].trailer {
			last++
			if mp.chunks[last].starts > 0 || !mp.chunks[last].trailer {
				break
			}
		}
	}
	if first < 0 || last >= len(mp.chunks) || first > last {
		return nil
	}
	off := mp.chunks[first].off
	end := mp.chunks[last].off + mp.chunks[last].size
	buf, err := mp.r.c.ReadRange(mp.values, off, end-off)
	if err != nil {
		return err
	}
	mp.spanOff, mp.span = off, buf
	return nil
}

// chunk decodes chunk i (reusing the last one decoded).
func (mp *miniPage) chunk(i int) ([]uint16, []uint16, *vblock, error) {
	if i == mp.lastIdx {
		return mp.lastRep, mp.lastDef, mp.lastVals, nil
	}
	c := mp.chunks[i]
	var buf []byte
	if c.off >= mp.spanOff && c.off+c.size <= mp.spanOff+uint64(len(mp.span)) && mp.span != nil {
		buf = mp.span[c.off-mp.spanOff : c.off-mp.spanOff+c.size]
	} else {
		var err error
		if buf, err = mp.r.c.ReadRange(mp.values, c.off, c.size); err != nil {
			return nil, nil, nil, err
		}
	}
	rep, def, vals, err := mp.decodeChunk(buf, c.items)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("chunk %d: %w", i, err)
	}
	mp.lastIdx, mp.lastRep, mp.lastDef, mp.lastVals = i, rep, def, vals
	return rep, def, vals, nil
}

// decodeChunk parses one chunk: a u16 level count, a u16 size for the rep
// levels (when the page has them), for the def levels (likewise) and for
// each value buffer, padding to 8 bytes, then the rep levels, def levels and
// value buffers, each padded to 8 bytes.
func (mp *miniPage) decodeChunk(buf []byte, items int) (rep, def []uint16, vals *vblock, err error) {
	nsizes := mp.numBuffers
	if mp.hasRep {
		nsizes++
	}
	if mp.hasDef {
		nsizes++
	}
	if len(buf) < 2+2*nsizes {
		return nil, nil, nil, corruptf("chunk of %d bytes", len(buf))
	}
	le := binary.LittleEndian
	numLevels := int(le.Uint16(buf))
	sizes := make([]int, nsizes)
	for i := range sizes {
		sizes[i] = int(le.Uint16(buf[2+2*i:]))
	}
	pos := pad8(2 + 2*nsizes)
	take := func(n int) ([]byte, error) {
		if pos > len(buf) || n > len(buf)-pos {
			return nil, corruptf("chunk buffer of %d bytes at %d past the %d-byte chunk", n, pos, len(buf))
		}
		b := buf[pos : pos+n]
		pos = pad8(pos + n)
		return b, nil
	}
	k := 0
	var repBuf, defBuf []byte
	if mp.hasRep {
		if repBuf, err = take(sizes[k]); err != nil {
			return
		}
		k++
	}
	if mp.hasDef {
		if defBuf, err = take(sizes[k]); err != nil {
			return
		}
		k++
	}
	bufs := make([][]byte, mp.numBuffers)
	for i := range bufs {
		if bufs[i], err = take(sizes[k]); err != nil {
			return
		}
		k++
	}
	if vals, err = decodeMiniValues(mp.l.GetValueCompression(), bufs, items); err != nil {
		return
	}
	if mp.dict != nil {
		// Keep the indices: an Arrow dictionary column takes them as they
		// are; other types gather the values when the array is built.
		if vals.kind != vFixed || vals.width%8 != 0 || vals.width > 64 || vals.width == 0 {
			return nil, nil, nil, corruptf("dictionary indices of %d bits", vals.width)
		}
		vals = &vblock{kind: vDict, n: vals.n, width: vals.width, data: vals.data, child: mp.dict}
	}
	if mp.hasRep {
		if rep, err = decodeLevels(mp.l.GetRepCompression(), repBuf, numLevels); err != nil {
			return
		}
	}
	if mp.hasDef {
		if def, err = decodeLevels(mp.l.GetDefCompression(), defBuf, numLevels); err != nil {
			return
		}
	}
	if !mp.hasRep && mp.hasDef && numLevels != items {
		return nil, nil, nil, corruptf("chunk of %d items has %d def levels", items, numLevels)
	}
	return rep, def, vals, nil
}

func decodeLevels(enc *enc21pb.CompressiveEncoding, buf []byte, n int) ([]uint16, error) {
	b, err := decodeBlock(enc, buf, n)
	if err != nil {
		return nil, err
	}
	if b.kind == vNull {
		return make([]uint16, n), nil
	}
	if b.kind != vFixed || b.width != 16 || b.n != n {
		return nil, corruptf("levels decoded to %d values of %d bits, want %d of 16", b.n, b.width, n)
	}
	out := make([]uint16, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b.data[2*i:])
	}
	return out, nil
}

// readRows decodes page-local rows [a, b).
func (mp *miniPage) readRows(p *PageInfo, a, b uint64) ([]levelSlice, error) {
	layers := mp.l.GetLayers()
	if !mp.hasRep {
		// Rows are items.
		var out []levelSlice
		i := sort.Search(len(mp.chunks), func(i int) bool {
			return mp.chunks[i].firstItem+uint64(mp.chunks[i].items) > a
		})
		for ; i < len(mp.chunks) && mp.chunks[i].firstItem < b; i++ {
			c := mp.chunks[i]
			_, def, vals, err := mp.chunk(i)
			if err != nil {
				return nil, err
			}
			s := int(max(a, c.firstItem) - c.firstItem)
			e := int(min(b, c.firstItem+uint64(c.items)) - c.firstItem)
			ls := levelSlice{layers: layers, vals: vals, from: s, to: e}
			if def != nil {
				ls.def = append([]uint16(nil), def[s:e]...)
			}
			out = append(out, ls)
		}
		return out, nil
	}
	// Lists: find the chunks holding rows [a, b) with the repetition index,
	// or decode the whole page without one.
	ci, cj := 0, len(mp.chunks)-1
	skip := a
	hasIndex := mp.l.GetRepetitionIndexDepth() > 0
	if hasIndex {
		ci = sort.Search(len(mp.chunks), func(i int) bool {
			return mp.chunks[i].firstRow+mp.chunks[i].starts > a
		})
		cj = sort.Search(len(mp.chunks), func(i int) bool {
			return mp.chunks[i].firstRow+mp.chunks[i].starts > b-1
		})
		if ci >= len(mp.chunks) || cj >= len(mp.chunks) {
			return nil, corruptf("rows [%d, %d) outside the repetition index", a, b)
		}
		for cj+1 < len(mp.chunks) && mp.chunks[cj].trailer {
			// The last row continues into the next chunk; a chunk with no
			// row starts is all continuation.
			cj++
			if mp.chunks[cj].starts > 0 || !mp.chunks[cj].trailer {
				break
			}
		}
		skip = a - mp.chunks[ci].firstRow
	}
	var rep, def []uint16
	var pieces []piece
	for i := ci; i <= cj; i++ {
		r, d, vals, err := mp.chunk(i)
		if err != nil {
			return nil, err
		}
		rep = append(rep, r...)
		if mp.hasDef {
			def = append(def, d...)
		}
		pieces = append(pieces, piece{vals, 0, vals.n})
	}
	pre := hasIndex && mp.chunks[ci].preamble
	l0, l1, i0, i1, err := sliceRows(rep, def, mp.mr, mp.mvd, pre, skip, skip+(b-a))
	if err != nil {
		return nil, err
	}
	var nitems int
	for _, pc := range pieces {
		nitems += pc.to
	}
	if i1 > nitems {
		return nil, corruptf("levels count %d visible items, the chunks hold %d", i1, nitems)
	}
	ls := levelSlice{layers: layers, rep: rep[l0:l1]}
	if def != nil {
		ls.def = def[l0:l1]
	}
	ls.pieces = cutPieces(pieces, i0, i1)
	return []levelSlice{ls}, nil
}

// cutPieces keeps items [from, to) of the concatenation of pieces.
func cutPieces(pieces []piece, from, to int) []piece {
	var out []piece
	pos := 0
	for _, pc := range pieces {
		n := pc.to - pc.from
		s, e := max(from, pos), min(to, pos+n)
		if s < e {
			out = append(out, piece{pc.b, pc.from + s - pos, pc.from + e - pos})
		}
		pos += n
	}
	return out
}

// gatherDict replaces dictionary indices by the dictionary values. An index
// outside the dictionary (possible only under a null) gives a zero value.
func gatherDict(dict, idx *vblock) (*vblock, error) {
	if idx.kind != vFixed || idx.width%8 != 0 || idx.width > 64 {
		return nil, corruptf("dictionary indices of %d bits", idx.width)
	}
	wb := idx.width / 8
	at := func(i int) uint64 {
		var v uint64
		for k := wb - 1; k >= 0; k-- {
			v = v<<8 | uint64(idx.data[i*wb+k])
		}
		return v
	}
	switch dict.kind {
	case vVar:
		var size uint64
		for i := 0; i < idx.n; i++ {
			if j := at(i); j < uint64(dict.n) {
				size += dict.offs[j+1] - dict.offs[j]
			}
		}
		if size > maxDecodedBytes {
			return nil, corruptf("dictionary values expand to %d bytes", size)
		}
		data := make([]byte, 0, size)
		offs := make([]uint64, idx.n+1)
		for i := 0; i < idx.n; i++ {
			if j := at(i); j < uint64(dict.n) {
				data = append(data, dict.data[dict.offs[j]:dict.offs[j+1]]...)
			}
			offs[i+1] = uint64(len(data))
		}
		return &vblock{kind: vVar, n: idx.n, data: data, offs: offs}, nil
	case vFixed:
		if dict.width%8 != 0 {
			return nil, unsupportedf("dictionary of %d-bit values", dict.width)
		}
		vb := dict.width / 8
		data := make([]byte, idx.n*vb)
		for i := 0; i < idx.n; i++ {
			if j := at(i); j < uint64(dict.n) {
				copy(data[i*vb:], dict.data[int(j)*vb:int(j+1)*vb])
			}
		}
		return &vblock{kind: vFixed, n: idx.n, width: dict.width, data: data}, nil
	case vNull:
		return &vblock{kind: vNull, n: idx.n}, nil
	}
	return nil, unsupportedf("dictionary of %v values", dict.kind)
}

// --- all-null layout ---

func (r *Reader) decodeAllNullPage(p *PageInfo, l *enc21pb.AllNullLayout, ranges []rowRange) ([]levelSlice, error) {
	layers := l.GetLayers()
	if err := checkLayers(layers); err != nil {
		return nil, err
	}
	if len(layers) == 1 {
		// No structure: every row is one null item.
		var out []levelSlice
		for _, rg := range ranges {
			n := int(rg.end - rg.start)
			def := make([]uint16, n)
			if layers[0] == enc21pb.RepDefLayer_REPDEF_NULLABLE_ITEM {
				for i := range def {
					def[i] = 1
				}
			}
			out = append(out, levelSlice{layers: layers, def: def, vals: &vblock{kind: vNull, n: n}, from: 0, to: n})
		}
		return out, nil
	}
	if len(p.Buffers) < 2 {
		return nil, corruptf("all-null page with %d buffers", len(p.Buffers))
	}
	read16 := func(ref BufferRef) ([]uint16, error) {
		if ref.Size == 0 {
			return nil, nil
		}
		if ref.Size%2 != 0 {
			return nil, corruptf("levels of %d bytes", ref.Size)
		}
		b, err := r.c.ReadBuffer(ref)
		if err != nil {
			return nil, err
		}
		out := make([]uint16, len(b)/2)
		for i := range out {
			out[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
		return out, nil
	}
	rep, err := read16(p.Buffers[0])
	if err != nil {
		return nil, err
	}
	def, err := read16(p.Buffers[1])
	if err != nil {
		return nil, err
	}
	if rep == nil && def == nil {
		return nil, corruptf("all-null page with structure but no levels")
	}
	if rep != nil && def != nil && len(rep) != len(def) {
		return nil, corruptf("%d rep levels, %d def levels", len(rep), len(def))
	}
	mr, mvd := maxRep(layers), maxVisibleDef(layers)
	var out []levelSlice
	for _, rg := range ranges {
		var l0, l1, i0, i1 int
		if rep == nil {
			if rg.end > uint64(len(def)) {
				return nil, corruptf("rows past the %d levels", len(def))
			}
			l0, l1 = int(rg.start), int(rg.end)
			i0, i1 = l0, l1
		} else if l0, l1, i0, i1, err = sliceRows(rep, def, mr, mvd, false, rg.start, rg.end); err != nil {
			return nil, err
		}
		ls := levelSlice{layers: layers, vals: &vblock{kind: vNull, n: i1 - i0}, from: 0, to: i1 - i0}
		if rep != nil {
			ls.rep = append([]uint16(nil), rep[l0:l1]...)
		}
		if def != nil {
			ls.def = append([]uint16(nil), def[l0:l1]...)
		}
		out = append(out, ls)
	}
	return out, nil
}
