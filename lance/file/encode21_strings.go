package file

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"

	"github.com/mvq-dev/mvq/lance/internal/fsst"
	"github.com/mvq-dev/mvq/lance/pb/enc21pb"
)

// Choices for variable-width pages, made by measured size as Lance does:
// dictionary (mini-block, any width) when values repeat, FSST when it
// shrinks the bytes by more than its 2312-byte table, else plain.
const (
	dictMinValues = 100
	fsstMinBytes  = 4 << 10
)

// dictionary is a page's values replaced by indices into unique values.
type dictionary struct {
	indices *fixedSink
	items   *varSink
}

// probeSeed seeds tryDictionary's sample hashes.
var probeSeed = maphash.MakeSeed()

// tryDictionary returns a dictionary when it is smaller than the plain
// values; it gives up as soon as half the values prove unique.
func tryDictionary(s *varSink, plainSize int) *dictionary {
	n := s.count()
	if n < dictMinValues {
		return nil
	}
	limit := n / 2
	// A sample from the start decides cheaply for mostly unique text. It
	// counts the values' hashes, copying none: a collision can only let
	// the exact pass below run.
	sample := min(n, 2048)
	probe := make(map[uint64]struct{}, 64)
	for i := 0; i < sample; i++ {
		probe[maphash.Bytes(probeSeed, s.data[s.offsets[i]:s.offsets[i+1]])] = struct{}{}
		if len(probe) > sample/2 {
			return nil
		}
	}
	seen := make(map[string]uint32, 64)
	w := 4
	if s.wide {
		w = 8
	}
	idx := &fixedSink{w: w, data: make([]byte, 0, n*w)}
	items := &varSink{offsets: []uint64{0}, wide: s.wide}
	for i := 0; i < n; i++ {
		v := s.data[s.offsets[i]:s.offsets[i+1]]
		k, ok := seen[string(v)]
		if !ok {
			if len(seen) >= limit {
				return nil
			}
			k = uint32(len(seen))
			seen[string(v)] = k
			items.add(v)
		}
		if w == 4 {
			idx.data = binary.LittleEndian.AppendUint32(idx.data, k)
		} else {
			idx.data = binary.LittleEndian.AppendUint64(idx.data, uint64(k))
		}
	}
	idx.n = n
	card := len(seen)
	size := len(items.data) + w*(card+1) + n*bits.Len(uint(card))/8 + 2*(n/1024+1)*w
	if size >= plainSize {
		return nil
	}
	return &dictionary{indices: idx, items: items}
}

// blockVariable serializes variable-width values as a Lance block:
// [bits per offset][offset of the bytes][offsets from 0][bytes], the header
// words as wide as the offsets.
func blockVariable(s *varSink) []byte {
	w := 4
	if s.wide {
		w = 8
	}
	start := uint64(2*w + w*len(s.offsets))
	b := make([]byte, 0, int(start)+len(s.data))
	put := func(v uint64) {
		if w == 4 {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		} else {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
	}
	put(uint64(8 * w))
	put(start)
	for _, o := range s.offsets {
		put(o)
	}
	return append(b, s.data...)
}

// tryFSST compresses the values when that saves more than the table costs,
// returning the compressed values and the serialized table. With shared
// tables (fc) the column's table is reused when it does about as well on
// these values as on the page it was trained on.
func tryFSST(s *varSink, fc fsstColumn) (*varSink, []byte) {
	if len(s.data) < fsstMinBytes {
		return nil, nil
	}
	if out := precoded(s); out != nil {
		return out, s.pre.table
	}
	var codes []byte
	var offs []uint64
	var table []byte
	reused := false
	if sh := fc.tables.get(fc.key); sh != nil {
		codes, offs = sh.enc.EncodeAll(s.data, s.offsets)
		if float64(len(codes)) <= float64(len(s.data))*(sh.ratio+fsstReuseSlack) {
			table, reused = sh.table, true
		} else {
			codes, offs = nil, nil // markedly worse: train on these values
		}
	}
	if table == nil {
		enc := fsst.Train(s.data, s.offsets)
		codes, offs = enc.EncodeAll(s.data, s.offsets)
		table = enc.Table()
		fc.tables.put(fc.key, &fsstShared{enc: enc, table: table, ratio: float64(len(codes)) / float64(len(s.data))})
	}
	if len(codes)+fsst.SymbolTableSize >= len(s.data) {
		return nil, nil
	}
	if reused {
		fc.tables.reused.Add(1)
	}
	return sinkOf(offs, codes, s.wide), table
}

// sinkOf is the sink of the values data[offs[i]:offs[i+1]] (offsets from
// 0), its longest value measured.
func sinkOf(offs []uint64, data []byte, wide bool) *varSink {
	out := &varSink{offsets: offs, data: data, wide: wide}
	for i := 1; i < len(offs); i++ {
		out.maxLen = max(out.maxLen, int(offs[i]-offs[i-1]))
	}
	return out
}

// precoded is s's values compressed with the codes they came with, when
// all of them did (under one table) and that saves more than the table
// costs; else nil.
func precoded(s *varSink) *varSink {
	p := &s.pre
	if p.bad || len(p.table) == 0 || len(p.offs) != len(s.offsets) || len(p.codes)+fsst.SymbolTableSize >= len(s.data) {
		return nil
	}
	precodedPages.Add(1)
	return sinkOf(p.offs, p.codes, s.wide)
}

// fsstReuseSlack is how much worse (in compressed bytes per input byte) a
// shared table may do on a page than on the page it was trained on before
// the page gets a table of its own: 2% of the page's input bytes.
const fsstReuseSlack = 0.02

// FSSTTables shares trained FSST symbol tables among the pages of a
// column (WriterOptions.FSST): in every file written with it, a column's
// strings are compressed with the table last trained for that column,
// unless that table does markedly worse on a page (by more than 2% of the
// page's bytes) than it did on the page it was trained on, which then gets
// a table of its own (and the column keeps it). Training is most of FSST's
// cost on small pages; a writer of many files or pages of one schema pays
// it once per column instead of once per page. Every page still stores its
// table, so the files read as any other. Share one only among files of the
// same schema (columns are keyed by field id). Safe for concurrent use, but
// what a file holds then depends on which writer trained first: share
// tables across writers only where the bytes need not be reproducible.
type FSSTTables struct {
	mu     sync.Mutex
	m      map[uint64]*fsstShared
	reused atomic.Int64
}

// NewFSSTTables returns empty shared tables.
func NewFSSTTables() *FSSTTables { return &FSSTTables{m: map[uint64]*fsstShared{}} }

// Reused is how many pages were compressed with a table trained for
// another page.
func (t *FSSTTables) Reused() int64 {
	if t == nil {
		return 0
	}
	return t.reused.Load()
}

// fsstShared is a trained table, its serialized form and the compressed
// size per input byte on the page it was trained on.
type fsstShared struct {
	enc   *fsst.Encoder
	table []byte
	ratio float64
}

// fsstColumn is a leaf column's key in its shared tables (nil: none).
type fsstColumn struct {
	tables *FSSTTables
	key    uint64 // field id << 32 | leaf index
}

func (t *FSSTTables) get(key uint64) *fsstShared {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[key]
}

func (t *FSSTTables) put(key uint64, s *fsstShared) {
	if t == nil {
		return
	}
	t.mu.Lock()
	if t.m == nil {
		t.m = map[uint64]*fsstShared{}
	}
	t.m[key] = s
	t.mu.Unlock()
}

func fsstEnc(table []byte, inner *enc21pb.CompressiveEncoding) *enc21pb.CompressiveEncoding {
	return &enc21pb.CompressiveEncoding{Compression: &enc21pb.CompressiveEncoding_Fsst{Fsst: &enc21pb.Fsst{SymbolTable: table, Values: inner}}}
}

// Values over 32 KiB in a full-zip page are compressed one by one with zstd
// (Lance's General per-value compression): each value becomes its length as
// a little-endian u64, then a zstd frame.
const perValueZstdMinLen = 32 << 10

var (
	zstdOnce sync.Once
	zstdEnc  *zstd.Encoder
)

func zstdEncoder() *zstd.Encoder {
	zstdOnce.Do(func() {
		zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	})
	return zstdEnc
}

// tryPerValueZstd compresses each value when the page holds values over
// 32 KiB and that makes the page smaller than limit bytes.
func tryPerValueZstd(s *varSink, limit int) *varSink {
	if s.maxLen <= perValueZstdMinLen {
		return nil
	}
	enc := zstdEncoder()
	out := &varSink{offsets: make([]uint64, 1, len(s.offsets)), wide: s.wide}
	for i := 1; i < len(s.offsets); i++ {
		v := s.data[s.offsets[i-1]:s.offsets[i]]
		out.data = binary.LittleEndian.AppendUint64(out.data, uint64(len(v)))
		out.data = enc.EncodeAll(v, out.data)
		out.offsets = append(out.offsets, uint64(len(out.data)))
		out.maxLen = max(out.maxLen, int(out.offsets[i]-out.offsets[i-1]))
		if len(out.data) >= limit {
			return nil
		}
	}
	return out
}

func zstdEncOf(inner *enc21pb.CompressiveEncoding) *enc21pb.CompressiveEncoding {
	level := int32(0)
	return &enc21pb.CompressiveEncoding{Compression: &enc21pb.CompressiveEncoding_General{General: &enc21pb.General{
		Compression: &enc21pb.BufferCompression{Scheme: enc21pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD, Level: &level},
		Values:      inner,
	}}}
}
