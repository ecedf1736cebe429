package file

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/mvq-dev/mvq/lance/pb/enc21pb"
)

// Mini-block limits (see the 2.1 encoding spec): a chunk holds a power of
// two values (the last may hold fewer), at most 4096, and at most 32 KiB in
// all; value buffers aim at 4 KiB.
const (
	miniblockMaxValues   = 4096
	miniblockMaxBytes    = 8*1024 - 6
	miniblockAimVarBytes = 4 * 1024
	miniblockMaxChunk    = 32 * 1024
	fullZipMinValueBytes = 256
)

// errChunkLevels: a mini-block chunk would hold more levels than its
// 16-bit header counts allow (a long run of empty or null lists).
var errChunkLevels = errors.New("mini-block chunk has too many levels")

func flatEnc(bits uint64) *enc21pb.CompressiveEncoding {
	return &enc21pb.CompressiveEncoding{Compression: &enc21pb.CompressiveEncoding_Flat{Flat: &enc21pb.Flat{BitsPerValue: bits}}}
}

func variableEnc(offsetBits uint64) *enc21pb.CompressiveEncoding {
	return &enc21pb.CompressiveEncoding{Compression: &enc21pb.CompressiveEncoding_Variable{Variable: &enc21pb.Variable{Offsets: flatEnc(offsetBits)}}}
}

func fslEnc(dim uint64, inner *enc21pb.CompressiveEncoding) *enc21pb.CompressiveEncoding {
	return &enc21pb.CompressiveEncoding{Compression: &enc21pb.CompressiveEncoding_FixedSizeList{FixedSizeList: &enc21pb.FixedSizeList{ItemsPerValue: dim, Values: inner}}}
}

// encodePage21 picks the page layout for one leaf's shredded data: all-null
// when no value is valid, mini-block for values under 256 bytes, full-zip
// for wider ones.
func encodePage21(sh *shredded, numRows uint64) (*enc21pb.PageLayout, [][]byte, error) {
	if sh.sink.count() == 0 || sh.valid == 0 {
		return allNullPage(sh), allNullBuffers(sh), nil
	}
	if vs, ok := sh.sink.(*varSink); ok {
		if d := tryDictionary(vs, len(vs.data)+4*len(vs.offsets)); d != nil {
			return encodeMiniblock(sh, d)
		}
	}
	if sh.sink.maxBytes() < fullZipMinValueBytes {
		return encodeMiniblock(sh, nil)
	}
	return encodeFullZip(sh)
}

func allNullPage(sh *shredded) *enc21pb.PageLayout {
	return &enc21pb.PageLayout{Layout: &enc21pb.PageLayout_AllNullLayout{AllNullLayout: &enc21pb.AllNullLayout{Layers: sh.layers}}}
}

// allNullBuffers are the rep and def levels as plain u16 (either may be
// empty); a lone nullable item layer needs neither.
func allNullBuffers(sh *shredded) [][]byte {
	if sh.rep == nil && len(sh.layers) == 1 {
		return nil
	}
	return [][]byte{u16bytes(sh.rep), u16bytes(sh.def)}
}

func u16bytes(v []uint16) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	return b
}

// mbChunk is one mini-block's values.
type mbChunk struct {
	n    int   // values in the chunk
	log  uint8 // log2(n), 0 for the last chunk
	bufs [][]byte
}

// chunkValues splits the sink's values into mini-block chunks.
func chunkValues(sink valueSink, fc fsstColumn) ([]mbChunk, *enc21pb.CompressiveEncoding, error) {
	switch s := sink.(type) {
	case *fixedSink:
		if s.dim == 0 {
			// The smallest of run-length, bitpacked and flat.
			best := s.n * s.w
			var chunks []mbChunk
			var enc *enc21pb.CompressiveEncoding
			if c, size := rleChunks(s); c != nil && size < best {
				chunks, enc, best = c, rleEnc(s.w*8), size
			}
			if c, size := inlineBitpacked(s); c != nil && size < best {
				chunks, enc = c, inlineBitpackEnc(s.w*8)
			}
			if chunks != nil {
				return chunks, enc, nil
			}
		}
		nulls := s.dim > 0 && s.hasItemNulls()
		word := s.w
		if nulls {
			word += (s.dim + 7) / 8
		}
		per, log := fixedChunkSize(word, 1)
		var out []mbChunk
		for i := 0; i < s.n; i += per {
			n := min(per, s.n-i)
			c := mbChunk{n: n, log: log, bufs: [][]byte{s.data[i*s.w : (i+n)*s.w]}}
			if nulls {
				// Item validity comes first, then the values.
				c.bufs = [][]byte{s.itemBits(i, n), c.bufs[0]}
			}
			out = append(out, c)
		}
		out[len(out)-1].log = lastLog(out[len(out)-1], per, log)
		enc := flatEnc(uint64(s.w * 8))
		if s.dim > 0 {
			enc = fslEnc(uint64(s.dim), flatEnc(uint64(s.innerW*8)))
			enc.GetFixedSizeList().HasValidity = nulls
		}
		return out, enc, nil
	case *bitSink:
		per, log := fixedChunkSize(1, 8)
		var out []mbChunk
		for i := 0; i < s.n; i += per {
			n := min(per, s.n-i)
			out = append(out, mbChunk{n: n, log: log, bufs: [][]byte{s.bits[i/8 : (i+n+7)/8]}})
		}
		out[len(out)-1].log = lastLog(out[len(out)-1], per, log)
		return out, flatEnc(1), nil
	case *varSink:
		if c, table := tryFSST(s, fc); c != nil {
			return chunkVariable(c), fsstEnc(table, variableEnc(offsetBits(s))), nil
		}
		return chunkVariable(s), variableEnc(offsetBits(s)), nil
	}
	return nil, nil, fmt.Errorf("no mini-block encoding for %T", sink)
}

func offsetBits(s *varSink) uint64 {
	if s.wide {
		return 64
	}
	return 32
}

// lastLog keeps a full final chunk's log (as Lance does) and marks a short
// one with 0.
func lastLog(c mbChunk, per int, log uint8) uint8 {
	if c.n == per {
		return log
	}
	return 0
}

// fixedChunkSize is the largest power-of-two count of values (at least 2,
// or 8 for sub-byte words) that keeps a chunk under about 8 KiB.
func fixedChunkSize(bytesPerWord, valuesPerWord int) (int, uint8) {
	size := 2 * bytesPerWord
	n, log := 2, uint8(1)
	if valuesPerWord == 8 {
		n, log = 8, 3
	}
	for 2*size < miniblockMaxBytes && 2*n <= miniblockMaxValues {
		size *= 2
		n *= 2
		log++
	}
	return n, log
}

// chunkVariable cuts variable-width values into chunks of a power of two
// values whose offsets and bytes stay near 4 KiB; each chunk's buffer is its
// n+1 offsets (relative to the chunk, the first pointing past them) then the
// bytes, padded to the offset width.
func chunkVariable(s *varSink) []mbChunk {
	w := 4
	if s.wide {
		w = 8
	}
	total := s.count()
	var out []mbChunk
	for start := 0; start < total; {
		rest := total - start
		size := func(n int) int { return (n+1)*w + int(s.offsets[start+n]-s.offsets[start]) }
		var n int
		last := false
		if rest <= miniblockMaxValues && size(rest) <= miniblockAimVarBytes {
			n, last = rest, true
		} else {
			n = 2
			for 2*n <= miniblockMaxValues && 2*n < rest && size(2*n) <= miniblockAimVarBytes {
				n *= 2
			}
			if n >= rest {
				n, last = rest, true
			}
		}
		buf := make([]byte, 0, size(n)+8)
		base := uint64((n+1)*w) - s.offsets[start]
		for i := 0; i <= n; i++ {
			if w == 4 {
				buf = binary.LittleEndian.AppendUint32(buf, uint32(s.offsets[start+i]+base))
			} else {
				buf = binary.LittleEndian.AppendUint64(buf, s.offsets[start+i]+base)
			}
		}
		buf = append(buf, s.data[s.offsets[start]:s.offsets[start+n]]...)
		for len(buf)%w != 0 {
			buf = append(buf, 0)
		}
		c := mbChunk{n: n, bufs: [][]byte{buf}}
		if !last {
			c.log = uint8(bits.TrailingZeros(uint(n)))
		}
		out = append(out, c)
		start += n
	}
	return out
}

func appendPad8(b []byte) []byte {
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	return b
}

// encodeMiniblock writes buffers [chunk metadata, chunks, dictionary?,
// repetition index?]; with a dictionary the chunks hold its indices.
func encodeMiniblock(sh *shredded, dict *dictionary) (*enc21pb.PageLayout, [][]byte, error) {
	var values valueSink = sh.sink
	if dict != nil {
		values = dict.indices
	}
	chunks, valueEnc, err := chunkValues(values, sh.fsst)
	if err != nil {
		return nil, nil, err
	}
	levels := len(sh.def)
	if sh.rep != nil {
		levels = len(sh.rep)
	}
	hasLevels := sh.rep != nil || sh.def != nil
	var maxRep uint16
	if sh.rep != nil {
		for _, r := range sh.rep {
			maxRep = max(maxRep, r)
		}
	}
	var repPack, defPack levelPacker
	if sh.rep != nil {
		repPack = newLevelPacker(sh.rep)
	}
	if sh.def != nil {
		defPack = newLevelPacker(sh.def)
	}
	est := 0
	for _, c := range chunks {
		est += 16 + 8*len(c.bufs)
		for _, b := range c.bufs {
			est += len(b)
		}
	}
	est += len(sh.rep)/2 + len(sh.def)/2
	var (
		meta     = make([]byte, 0, 2*len(chunks))
		data     = make([]byte, 0, est)
		repIndex []uint64
		pos      int
	)
	for ci, c := range chunks {
		end := pos
		switch {
		case !hasLevels:
		case ci == len(chunks)-1:
			end = levels
		case sh.vis == nil:
			end = pos + c.n
		default:
			for taken := 0; taken < c.n; end++ {
				if sh.vis[end] {
					taken++
				}
			}
		}
		nlev := end - pos
		if nlev > 0x7fff {
			return nil, nil, fmt.Errorf("%w: %d levels", errChunkLevels, nlev)
		}
		if sh.rep != nil {
			r := sh.rep[pos:end]
			rows := 0
			for _, v := range r[min(1, len(r)):] {
				if v == maxRep {
					rows++
				}
			}
			left := 0
			if ci < len(chunks)-1 {
				left = len(r)
				for k := len(r) - 1; k >= 0; k-- {
					if r[k] == maxRep {
						left = len(r) - k
						break
					}
				}
			}
			if ci != 0 && len(r) > 0 && r[0] == maxRep {
				if repIndex[len(repIndex)-1] != 0 {
					repIndex[len(repIndex)-2]++
					repIndex[len(repIndex)-1] = 0
				}
			}
			if ci == len(chunks)-1 {
				rows++
			}
			repIndex = append(repIndex, uint64(rows), uint64(left))
		}
		start := len(data)
		data = binary.LittleEndian.AppendUint16(data, uint16(nlev))
		var repB, defB []byte
		if sh.rep != nil {
			repB = repPack.pack(sh.rep[pos:end])
			data = binary.LittleEndian.AppendUint16(data, uint16(len(repB)))
		}
		if sh.def != nil {
			defB = defPack.pack(sh.def[pos:end])
			data = binary.LittleEndian.AppendUint16(data, uint16(len(defB)))
		}
		for _, b := range c.bufs {
			if len(b) > 0xffff {
				return nil, nil, fmt.Errorf("mini-block buffer of %d bytes", len(b))
			}
			data = binary.LittleEndian.AppendUint16(data, uint16(len(b)))
		}
		data = appendPad8(data)
		if sh.rep != nil {
			data = appendPad8(append(data, repB...))
		}
		if sh.def != nil {
			data = appendPad8(append(data, defB...))
		}
		for _, b := range c.bufs {
			data = appendPad8(append(data, b...))
		}
		size := len(data) - start
		if size > miniblockMaxChunk {
			return nil, nil, fmt.Errorf("mini-block chunk of %d bytes", size)
		}
		meta = binary.LittleEndian.AppendUint16(meta, uint16((size/8-1)<<4)|uint16(c.log))
		pos = end
	}
	mb := &enc21pb.MiniBlockLayout{
		ValueCompression: valueEnc,
		Layers:           sh.layers,
		NumBuffers:       uint64(len(chunks[0].bufs)),
		NumItems:         uint64(sh.sink.count()),
	}
	bufs := [][]byte{meta, data}
	if dict != nil {
		mb.Dictionary = variableEnc(offsetBits(dict.items))
		mb.NumDictionaryItems = uint64(dict.items.count())
		bufs = append(bufs, blockVariable(dict.items))
	}
	if sh.rep != nil {
		mb.RepCompression = repPack.encoding()
		mb.RepetitionIndexDepth = 1
		ri := make([]byte, 0, 8*len(repIndex))
		for _, v := range repIndex {
			ri = binary.LittleEndian.AppendUint64(ri, v)
		}
		bufs = append(bufs, ri)
	}
	if sh.def != nil {
		mb.DefCompression = defPack.encoding()
	}
	return &enc21pb.PageLayout{Layout: &enc21pb.PageLayout_MiniBlockLayout{MiniBlockLayout: mb}}, bufs, nil
}

// bitLen is the number of bits needed for v (Lance's log_2_ceil).
func bitLen(v uint16) uint32 { return uint32(bits.Len16(v)) }

// encodeFullZip zips control words (rep in the high bits, def in the low)
// with each value: fixed values as is, variable ones behind a 4- or 8-byte
// length (nulls carry no length). Buffers: [data, repetition index?]; the
// index holds the byte offset of each row plus the end, byte-packed.
func encodeFullZip(sh *shredded) (*enc21pb.PageLayout, [][]byte, error) {
	var maxRep, maxDef uint16
	for _, r := range sh.rep {
		maxRep = max(maxRep, r)
	}
	for _, d := range sh.def {
		maxDef = max(maxDef, d)
	}
	bitsRep, bitsDef := uint32(0), uint32(0)
	if sh.rep != nil {
		bitsRep = bitLen(maxRep)
	}
	if sh.def != nil {
		bitsDef = bitLen(maxDef)
	}
	word := 0
	if tot := bitsRep + bitsDef; tot > 0 {
		switch {
		case tot <= 8:
			word = 1
		case tot <= 16:
			word = 2
		default:
			word = 4
		}
	}
	nitems := sh.sink.count()
	if sh.rep != nil {
		nitems = len(sh.rep)
	} else if sh.def != nil {
		nitems = len(sh.def)
	}
	putWord := func(buf []byte, i int) []byte {
		var w uint32
		if sh.rep != nil {
			w = uint32(sh.rep[i]) << bitsDef
		}
		if sh.def != nil {
			w |= uint32(sh.def[i])
		}
		switch word {
		case 1:
			return append(buf, byte(w))
		case 2:
			return binary.LittleEndian.AppendUint16(buf, uint16(w))
		case 4:
			return binary.LittleEndian.AppendUint32(buf, w)
		}
		return buf
	}
	layout := &enc21pb.FullZipLayout{
		BitsRep: bitsRep, BitsDef: bitsDef,
		NumItems: uint32(nitems), NumVisibleItems: uint32(sh.sink.count()),
		Layers: sh.layers,
	}
	var data []byte
	var rowStarts []uint64
	needIndex := sh.rep != nil
	newRow := func(i int) bool { return sh.rep == nil || sh.rep[i] == maxRep }
	vi := 0
	switch s := sh.sink.(type) {
	case *fixedSink:
		layout.Details = &enc21pb.FullZipLayout_BitsPerValue{BitsPerValue: uint32(s.w * 8)}
		layout.ValueCompression = flatEnc(uint64(s.w * 8))
		if s.dim > 0 {
			layout.ValueCompression = fslEnc(uint64(s.dim), flatEnc(uint64(s.innerW*8)))
		}
		nulls := s.dim > 0 && s.hasItemNulls()
		if nulls {
			// Each value is its items' validity bytes, then the items.
			vb := (s.dim + 7) / 8
			zipped := make([]byte, 0, (s.w+vb)*s.n)
			for k := 0; k < s.n; k++ {
				zipped = append(zipped, s.itemBits(k, 1)...)
				zipped = append(zipped, s.data[k*s.w:(k+1)*s.w]...)
			}
			s = &fixedSink{w: s.w + vb, data: zipped, n: s.n}
			layout.Details = &enc21pb.FullZipLayout_BitsPerValue{BitsPerValue: uint32(s.w * 8)}
			layout.ValueCompression.GetFixedSizeList().HasValidity = true
		}
		if word == 0 {
			data = s.data
			break
		}
		data = make([]byte, 0, len(s.data)+word*nitems)
		for i := 0; i < nitems; i++ {
			if needIndex && newRow(i) {
				rowStarts = append(rowStarts, uint64(len(data)))
			}
			data = putWord(data, i)
			if sh.vis == nil || sh.vis[i] {
				data = append(data, s.data[vi*s.w:(vi+1)*s.w]...)
				vi++
			}
		}
	case *varSink:
		needIndex = true
		ob := offsetBits(s)
		layout.Details = &enc21pb.FullZipLayout_BitsPerOffset{BitsPerOffset: uint32(ob)}
		layout.ValueCompression = variableEnc(ob)
		if z := tryPerValueZstd(s, len(s.data)*9/10); z != nil {
			s = z
			layout.ValueCompression = zstdEncOf(variableEnc(ob))
		} else if c, table := tryFSST(s, sh.fsst); c != nil {
			s = c
			layout.ValueCompression = fsstEnc(table, variableEnc(ob))
		}
		data = make([]byte, 0, len(s.data)+(word+int(ob/8))*nitems)
		for i := 0; i < nitems; i++ {
			if newRow(i) {
				rowStarts = append(rowStarts, uint64(len(data)))
			}
			data = putWord(data, i)
			if sh.vis == nil || sh.vis[i] {
				if sh.def == nil || sh.def[i] == 0 {
					v := s.data[s.offsets[vi]:s.offsets[vi+1]]
					if ob == 32 {
						data = binary.LittleEndian.AppendUint32(data, uint32(len(v)))
					} else {
						data = binary.LittleEndian.AppendUint64(data, uint64(len(v)))
					}
					data = append(data, v...)
				}
				vi++
			}
		}
	default:
		return nil, nil, fmt.Errorf("no full-zip encoding for %T", sh.sink)
	}
	bufs := [][]byte{data}
	if needIndex {
		rowStarts = append(rowStarts, uint64(len(data)))
		bufs = append(bufs, bytePack(rowStarts))
	}
	return &enc21pb.PageLayout{Layout: &enc21pb.PageLayout_FullZipLayout{FullZipLayout: layout}}, bufs, nil
}

// bytePack stores v in the narrowest of 1, 2, 4 or 8 bytes that fits its
// last (largest) value.
func bytePack(v []uint64) []byte {
	m := v[len(v)-1]
	switch {
	case m <= 0xff:
		b := make([]byte, len(v))
		for i, x := range v {
			b[i] = byte(x)
		}
		return b
	case m <= 0xffff:
		b := make([]byte, 0, 2*len(v))
		for _, x := range v {
			b = binary.LittleEndian.AppendUint16(b, uint16(x))
		}
		return b
	case m <= 0xffffffff:
		b := make([]byte, 0, 4*len(v))
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		}
		return b
	}
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return b
}
