package file

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/mvq-dev/mvq/lance/pb/enc21pb"
)

// The fuzz targets feed hostile bytes to the container and the 2.1
// decoders: they may fail, never panic, hang or allocate without bound.

func addGoldenSeeds(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.lance"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[len(b)/2:])
	}
	f.Add([]byte("LANC"))
}

func FuzzOpen(f *testing.F) {
	addGoldenSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Open(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		ctx := context.Background()
		end := min(r.NumRows(), 2000)
		for c := range r.Schema().Fields() {
			if rec, err := r.Read(ctx, []int{c}, 0, end); err == nil {
				rec.Release()
			}
			if end > 0 {
				if rec, err := r.Take(ctx, []int{c}, []uint64{end - 1, 0, end / 2}); err == nil {
					rec.Release()
				}
			}
		}
	})
}

// miniEncodings are the value encodings FuzzDecodeMiniblock picks from.
var miniEncodings = func() []*enc21pb.CompressiveEncoding {
	flat := func(b uint64) *enc21pb.CompressiveEncoding {
		return &enc21pb.CompressiveEncoding{Compression: &enc21pb.CompressiveEncoding_Flat{Flat: &enc21pb.Flat{BitsPerValue: b}}}
	}
	variable := func(b uint64) *enc21pb.CompressiveEncoding {
		return &enc21pb.CompressiveEncoding{Compression: &enc21pb.CompressiveEncoding_Variable{Variable: &enc21pb.Variable{Offsets: flat(b)}}}
	}
	general := func(s enc21pb.CompressionScheme, inner *enc21pb.CompressiveEncoding) *enc21pb.CompressiveEncoding {
		return &enc21pb.CompressiveEncoding{Compression: &enc21pb.CompressiveEncoding_General{General: &enc21pb.General{
			Compression: &enc21pb.BufferCompression{Scheme: s}, Values: inner}}}
	}
	st := make([]byte, 2312)
	binary.LittleEndian.PutUint64(st, 0x46535354<<32|1<<24|3)
	copy(st[8:], "ab\x00\x00\x00\x00\x00\x00c\x00\x00\x00\x00\x00\x00\x00xyz\x00\x00\x00\x00\x00")
	copy(st[32:], []byte{2, 1, 3})
	return []*enc21pb.CompressiveEncoding{
		flat(1), flat(8), flat(32), flat(64), flat(128),
		{Compression: &enc21pb.CompressiveEncoding_InlineBitpacking{InlineBitpacking: &enc21pb.InlineBitpacking{UncompressedBitsPerValue: 32}}},
		{Compression: &enc21pb.CompressiveEncoding_InlineBitpacking{InlineBitpacking: &enc21pb.InlineBitpacking{UncompressedBitsPerValue: 64}}},
		{Compression: &enc21pb.CompressiveEncoding_InlineBitpacking{InlineBitpacking: &enc21pb.InlineBitpacking{UncompressedBitsPerValue: 8}}},
		variable(32), variable(64),
		{Compression: &enc21pb.CompressiveEncoding_Fsst{Fsst: &enc21pb.Fsst{SymbolTable: st, Values: variable(32)}}},
		{Compression: &enc21pb.CompressiveEncoding_Rle{Rle: &enc21pb.Rle{Values: flat(32), RunLengths: flat(8)}}},
		{Compression: &enc21pb.CompressiveEncoding_ByteStreamSplit{ByteStreamSplit: &enc21pb.ByteStreamSplit{Values: flat(64)}}},
		{Compression: &enc21pb.CompressiveEncoding_FixedSizeList{FixedSizeList: &enc21pb.FixedSizeList{ItemsPerValue: 4, HasValidity: true, Values: flat(32)}}},
		general(enc21pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD, flat(32)),
		general(enc21pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4, variable(32)),
		{Compression: &enc21pb.CompressiveEncoding_PackedStruct{PackedStruct: &enc21pb.PackedStruct{BitsPerValue: []uint64{32, 64}, Values: flat(96)}}},
	}
}()

func FuzzDecodeMiniblock(f *testing.F) {
	f.Add(uint8(5), uint16(10), uint16(3), []byte{5, 0, 0, 0, 1, 2, 3, 4, 5, 6})
	f.Add(uint8(8), uint16(2), uint16(12), []byte{12, 0, 0, 0, 14, 0, 0, 0, 17, 0, 0, 0, 'a', 'b', 'c', 'd', 'e'})
	f.Add(uint8(11), uint16(9), uint16(8), []byte{1, 0, 0, 0, 2, 0, 0, 0, 4, 5})
	f.Fuzz(func(t *testing.T, sel uint8, n, cut uint16, data []byte) {
		enc := miniEncodings[int(sel)%len(miniEncodings)]
		c := int(cut) % (len(data) + 1)
		bufs := [][]byte{data[:c], data[c:]}
		if b, err := decodeMiniValues(enc, bufs, int(n)%5000); err == nil && b.n != int(n)%5000 {
			t.Fatalf("%d values, asked %d", b.n, int(n)%5000)
		}
		// The same bytes as a whole chunk of a page with rep and def levels.
		mp := &miniPage{l: &enc21pb.MiniBlockLayout{ValueCompression: enc,
			RepCompression: &enc21pb.CompressiveEncoding{Compression: &enc21pb.CompressiveEncoding_Flat{Flat: &enc21pb.Flat{BitsPerValue: 16}}},
			DefCompression: &enc21pb.CompressiveEncoding{Compression: &enc21pb.CompressiveEncoding_OutOfLineBitpacking{OutOfLineBitpacking: &enc21pb.OutOfLineBitpacking{
				UncompressedBitsPerValue: 16, Values: &enc21pb.CompressiveEncoding{Compression: &enc21pb.CompressiveEncoding_Flat{Flat: &enc21pb.Flat{BitsPerValue: 2}}}}}},
		}, hasRep: true, hasDef: true, numBuffers: 1 + int(sel)%2}
		mp.decodeChunk(data, int(n)%5000)
	})
}

func FuzzBitunpack(f *testing.F) {
	f.Add(uint8(3), uint8(1), uint16(1024), make([]byte, 130))
	f.Add(uint8(16), uint8(2), uint16(1500), make([]byte, 4000))
	f.Fuzz(func(t *testing.T, w, word uint8, n uint16, data []byte) {
		bits := []uint64{8, 16, 32, 64}[int(word)%4]
		if b, err := unpackInline(bits, data, int(n)%1100); err == nil && b.n != int(n)%1100 {
			t.Fatal("wrong count")
		}
		if b, err := unpackOutOfLine(bits, uint64(w), data, int(n)); err == nil && b.n != int(n) {
			t.Fatal("wrong count")
		}
	})
}

func FuzzLevels(f *testing.F) {
	f.Add([]byte{3, 3, 0, 0, 1, 2, 0, 0}, []byte{4, 1}, uint16(3))
	f.Add([]byte{1, 1, 0, 2, 0, 1}, []byte{3, 6, 3}, uint16(2))
	f.Fuzz(func(t *testing.T, levels, layerBytes []byte, items uint16) {
		if len(layerBytes) == 0 || len(layerBytes) > 8 {
			return
		}
		layers := make([]enc21pb.RepDefLayer, len(layerBytes))
		for i, b := range layerBytes {
			layers[i] = enc21pb.RepDefLayer(b % 7)
		}
		if checkLayers(layers) != nil {
			return
		}
		half := len(levels) / 2
		rep := make([]uint16, half)
		def := make([]uint16, half)
		for i := 0; i < half; i++ {
			rep[i] = uint16(levels[i] % 4)
			def[i] = uint16(levels[half+i] % 5)
		}
		if maxRep(layers) == 0 {
			rep = nil
		}
		unravel(rep, def, layers, int(items)%64)
		if rep != nil {
			sliceRows(rep, def, maxRep(layers), maxVisibleDef(layers), len(levels) > 0 && levels[0]%2 == 0, uint64(items%3), uint64(items%3)+2)
		}
	})
}

func FuzzFullZip(f *testing.F) {
	f.Add(uint8(0), []byte{0, 5, 'h', 'e', 'l', 'l', 'o', 1, 0, 3, 'a', 'b', 'c'}, uint16(3))
	f.Fuzz(func(t *testing.T, sel uint8, data []byte, rows uint16) {
		l := &enc21pb.FullZipLayout{BitsDef: 1, Layers: []enc21pb.RepDefLayer{enc21pb.RepDefLayer_REPDEF_NULLABLE_ITEM}}
		fz := &fullZip{l: l, cwBytes: 1, bitsDef: 1, hasDef: true, mvd: 1}
		switch sel % 3 {
		case 0:
			l.Details = &enc21pb.FullZipLayout_BitsPerOffset{BitsPerOffset: 8}
			l.ValueCompression = miniEncodings[8]
			fz.lenBytes = 1
		case 1:
			l.Details = &enc21pb.FullZipLayout_BitsPerOffset{BitsPerOffset: 32}
			l.ValueCompression = miniEncodings[10]
			fz.lenBytes = 4
		case 2:
			l.Details = &enc21pb.FullZipLayout_BitsPerValue{BitsPerValue: 136}
			l.ValueCompression = miniEncodings[13]
			fz.fixed, fz.valueBytes = true, 17
		}
		fz.unzip(data, int(rows))
	})
}
