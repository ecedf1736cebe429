package fsst

import (
	"fmt"
	"sort"
	"unsafe"
)

// NewEncoder returns an encoder that compresses with t's symbols, keeping
// their codes, so that what it writes decodes with t (and t's codes can be
// mixed with its own). t must be compressed.
func NewEncoder(t *Table) (*Encoder, error) {
	if !t.Compressed {
		return nil, fmt.Errorf("fsst: an uncompressed table has no symbols")
	}
	if t.NumSymbols > Escape {
		return nil, fmt.Errorf("%w: %d symbols", ErrCorrupt, t.NumSymbols)
	}
	e := &Encoder{n: t.NumSymbols}
	for c := 0; c < e.n; c++ {
		l := t.Lens[c]
		if l < 1 || l > 8 {
			return nil, fmt.Errorf("%w: symbol %d has length %d", ErrCorrupt, c, l)
		}
		e.syms[c], e.lens[c] = t.Symbols[c]&masks[l], l
	}
	e.lookups()
	return e, nil
}

// Cutter makes the codes of substrings of one compressed string from the
// string's own codes: the codes that fall inside the substring are copied
// and only the few bytes at its ends (less than a symbol at each) are
// encoded. A text chunker's chunks are substrings of their document, so a
// chunk column takes its codes from the document's in a fraction of the
// time encoding it anew takes. Reset it for each string.
type Cutter struct {
	t     *Table
	enc   *Encoder
	codes []byte
	// pos[k] is where code k starts in the decoded string and at[k] where
	// it starts in codes; the last entries are the ends.
	pos []uint32
	at  []uint32
}

// NewCutter returns a cutter of strings compressed with t, which enc
// (NewEncoder(t)) encodes the ends with.
func NewCutter(t *Table, enc *Encoder) *Cutter { return &Cutter{t: t, enc: enc} }

// Reset makes codes, the compression of one string, the string cut. It
// fails on codes t cannot decode.
func (c *Cutter) Reset(codes []byte) error {
	c.codes = codes
	c.pos, c.at = c.pos[:0], c.at[:0]
	p := uint32(0)
	for i := 0; i < len(codes); {
		c.pos = append(c.pos, p)
		c.at = append(c.at, uint32(i))
		if k := codes[i]; k == Escape {
			if i+1 >= len(codes) {
				return fmt.Errorf("%w: escape at the end of a string", ErrCorrupt)
			}
			p++
			i += 2
		} else {
			if int(k) >= c.t.NumSymbols {
				return fmt.Errorf("%w: code %d but only %d symbols", ErrCorrupt, k, c.t.NumSymbols)
			}
			p += uint32(c.t.Lens[k])
			i++
		}
	}
	c.pos = append(c.pos, p)
	c.at = append(c.at, uint32(len(codes)))
	return nil
}

// Len is the decoded length of the string (0 before Reset).
func (c *Cutter) Len() int {
	if len(c.pos) == 0 {
		return 0
	}
	return int(c.pos[len(c.pos)-1])
}

// AppendCut appends the compression of text[a:b] to dst, where text is
// the decoded string (its bytes are read only at the cut's ends). It
// fails when [a, b) is not within the string.
func (c *Cutter) AppendCut(dst []byte, text string, a, b int) ([]byte, error) {
	if len(c.pos) == 0 || a < 0 || b < a || b > c.Len() || len(text) != c.Len() {
		return dst, fmt.Errorf("fsst: cut [%d, %d) of a %d-byte string", a, b, len(text))
	}
	// i: the first code starting at or after a; j: the last boundary at
	// or before b. The codes in between are the middle of the cut.
	i := sort.Search(len(c.pos), func(k int) bool { return c.pos[k] >= uint32(a) })
	j := sort.Search(len(c.pos), func(k int) bool { return c.pos[k] > uint32(b) }) - 1
	bs := unsafe.Slice(unsafe.StringData(text), len(text))
	if i >= len(c.pos) || j < i {
		// No whole code inside the cut: encode it all.
		return c.enc.appendTail(dst, bs[a:b]), nil
	}
	dst = c.enc.appendTail(dst, bs[a:c.pos[i]])
	dst = append(dst, c.codes[c.at[i]:c.at[j]]...)
	return c.enc.appendTail(dst, bs[c.pos[j]:b]), nil
}
