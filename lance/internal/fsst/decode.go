// Package fsst implements FSST (Fast Static Symbol Table) string
// compression as Lance 2.1 files use it.
//
// # Symbol table layout
//
// A serialized symbol table is always SymbolTableSize (2312) bytes:
//
//	bytes 0..8      header, a little-endian u64:
//	                  bits 32..63  magic 0x46535354 ("FSST")
//	                  bit  24      1 when the data is compressed; 0 when the
//	                               input was too small to be worth it and the
//	                               strings are stored as they are
//	                  bits 16..23  suffix limit (encoder detail, ignored here)
//	                  bits  8..15  terminator (encoder detail, ignored here)
//	                  bits  0..7   number of symbols n (codes 0..n-1)
//	bytes 8..8+8n   symbol i as a little-endian u64, its bytes first
//	next n bytes    the length of symbol i (1..8)
//	rest            zero padding up to SymbolTableSize
//
// # Compressed strings
//
// Each string is compressed on its own (offsets are kept per string). A
// compressed string is a sequence of codes: a byte c < 255 stands for the
// first len(c) bytes of symbol c; the escape byte 255 is followed by one
// literal byte.
package fsst

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// SymbolTableSize is the size of a serialized symbol table.
const SymbolTableSize = 8 + 256*8 + 256

// Magic is the header's upper 32 bits.
const Magic uint64 = 0x46535354 << 32

// Escape is the code that introduces a literal byte.
const Escape = 255

// ErrCorrupt is wrapped by decode errors on malformed input.
var ErrCorrupt = errors.New("fsst: corrupt")

// Table is a parsed symbol table.
type Table struct {
	// Compressed is false when the strings were stored uncompressed.
	Compressed bool
	NumSymbols int
	Symbols    [256]uint64
	Lens       [256]uint8
}

// ParseTable parses a serialized symbol table.
func ParseTable(b []byte) (*Table, error) {
	if len(b) != SymbolTableSize {
		return nil, fmt.Errorf("%w: symbol table of %d bytes, want %d", ErrCorrupt, len(b), SymbolTableSize)
	}
	h := binary.LittleEndian.Uint64(b)
	if h&(0xFFFFFFFF<<32) != Magic {
		return nil, fmt.Errorf("%w: symbol table has no FSST magic", ErrCorrupt)
	}
	t := &Table{Compressed: h&(1<<24) != 0, NumSymbols: int(h & 255)}
	for i := 0; i < t.NumSymbols; i++ {
		t.Symbols[i] = binary.LittleEndian.Uint64(b[8+8*i:])
		l := b[8+8*t.NumSymbols+i]
		if l < 1 || l > 8 {
			return nil, fmt.Errorf("%w: symbol %d has length %d", ErrCorrupt, i, l)
		}
		t.Lens[i] = l
	}
	return t, nil
}

// DecodedLen returns the decompressed length of src, or an error if src is
// malformed (a code without a symbol, a dangling escape).
func (t *Table) DecodedLen(src []byte) (int, error) {
	if !t.Compressed {
		return len(src), nil
	}
	n := 0
	for i := 0; i < len(src); {
		c := src[i]
		if c == Escape {
			if i+1 >= len(src) {
				return 0, fmt.Errorf("%w: escape at the end of a string", ErrCorrupt)
			}
			n++
			i += 2
			continue
		}
		if int(c) >= t.NumSymbols {
			return 0, fmt.Errorf("%w: code %d but only %d symbols", ErrCorrupt, c, t.NumSymbols)
		}
		n += int(t.Lens[c])
		i++
	}
	return n, nil
}

// AppendDecode appends the decompression of one string src to dst.
func (t *Table) AppendDecode(dst, src []byte) ([]byte, error) {
	if !t.Compressed {
		return append(dst, src...), nil
	}
	for i := 0; i < len(src); {
		c := src[i]
		if c == Escape {
			if i+1 >= len(src) {
				return dst, fmt.Errorf("%w: escape at the end of a string", ErrCorrupt)
			}
			dst = append(dst, src[i+1])
			i += 2
			continue
		}
		if int(c) >= t.NumSymbols {
			return dst, fmt.Errorf("%w: code %d but only %d symbols", ErrCorrupt, c, t.NumSymbols)
		}
		s := t.Symbols[c]
		for k := uint8(0); k < t.Lens[c]; k++ {
			dst = append(dst, byte(s>>(8*k)))
		}
		i++
	}
	return dst, nil
}

// DecodeAll decompresses the strings data[offsets[i]:offsets[i+1]] into one
// buffer and returns it with the new offsets (len(offsets) of them, starting
// at 0). Offsets must be non-decreasing and within data. The output size is
// computed first, so nothing is allocated beyond what the strings decode to.
func (t *Table) DecodeAll(data []byte, offsets []uint64) ([]byte, []uint64, error) {
	if len(offsets) == 0 {
		return nil, nil, nil
	}
	for i := 1; i < len(offsets); i++ {
		if offsets[i-1] > offsets[i] || offsets[i] > uint64(len(data)) {
			return nil, nil, fmt.Errorf("%w: offsets [%d, %d) outside %d bytes", ErrCorrupt, offsets[i-1], offsets[i], len(data))
		}
	}
	outOff := make([]uint64, len(offsets))
	if !t.Compressed {
		out := append([]byte(nil), data[offsets[0]:offsets[len(offsets)-1]]...)
		for i := range offsets {
			outOff[i] = offsets[i] - offsets[0]
		}
		return out, outOff, nil
	}
	total, err := t.DecodedLen(data[offsets[0]:offsets[len(offsets)-1]])
	if err != nil {
		return nil, nil, err
	}
	// Symbols are written 8 bytes at a time; the slack keeps the last write
	// inside the buffer.
	out := make([]byte, total+8)
	pos := 0
	for i := 1; i < len(offsets); i++ {
		src := data[offsets[i-1]:offsets[i]]
		for k := 0; k < len(src); {
			c := src[k]
			if c == Escape {
				if k+1 >= len(src) {
					return nil, nil, fmt.Errorf("%w: escape at the end of a string", ErrCorrupt)
				}
				out[pos] = src[k+1]
				pos++
				k += 2
				continue
			}
			binary.LittleEndian.PutUint64(out[pos:], t.Symbols[c])
			pos += int(t.Lens[c])
			k++
		}
		outOff[i] = uint64(pos)
	}
	return out[:pos], outOff, nil
}
