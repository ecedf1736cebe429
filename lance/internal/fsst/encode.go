package fsst

import (
	"encoding/binary"
	"sort"
)

// Encoder compresses strings with one symbol table built from a sample of
// them (Boncz, Neumann, Leis: "FSST: Fast Random Access String
// Compression", VLDB 2020): up to 255 symbols of 1 to 8 bytes, each string
// coded greedily by the longest symbol that matches, bytes no symbol covers
// escaped.
type Encoder struct {
	n     int
	syms  [255]uint64
	lens  [255]uint8
	index [256][]uint8 // codes by first byte, longest first
	// Lookup for encoding: codes+1 of 1- and 2-byte symbols, and the longer
	// symbols by their first two bytes, longest first.
	one [256]uint16
	two []uint16
	// longHead[first two bytes] is code+1 of the longest symbol of 3 or
	// more bytes starting with them; longNext[code] the next shorter one.
	longHead []uint8
	longNext [255]uint8
}

// maxSample bounds the bytes the table is trained on.
const maxSample = 1 << 16

// Train builds a symbol table from the strings data[offsets[i]:offsets[i+1]].
// Offsets must be non-decreasing and within data.
func Train(data []byte, offsets []uint64) *Encoder {
	sample := sampleStrings(data, offsets)
	e := &Encoder{}
	for gen := 0; gen < 8; gen++ {
		e.build(e.count(sample, gen))
	}
	return e
}

func sampleStrings(data []byte, offsets []uint64) [][]byte {
	var out [][]byte
	n := len(offsets) - 1
	if n <= 0 {
		return nil
	}
	total := 0
	// Stride through the strings so the sample spans the page.
	step := 1
	if int(offsets[n]-offsets[0]) > maxSample {
		step = int((offsets[n] - offsets[0]) / maxSample * 2)
		step = max(1, min(step, n/64+1))
	}
	for i := 0; i < n && total < maxSample; i += step {
		s := data[offsets[i]:offsets[i+1]]
		if len(s) > 512 {
			s = s[:512]
		}
		out = append(out, s)
		total += len(s)
	}
	return out
}

type candidate struct {
	sym  uint64
	len  uint8
	gain int
}

// count compresses the sample with the current table and counts how often
// each symbol (and each byte, escaped or not) occurs and how often pairs of
// consecutive symbols do; the candidates are the symbols and the pairs'
// concatenations (capped at 8 bytes), by gain = count * length.
func (e *Encoder) count(sample [][]byte, gen int) []candidate {
	type key struct {
		sym uint64
		len uint8
	}
	counts := map[key]int{}
	for _, s := range sample {
		var prev key
		havePrev := false
		for i := 0; i < len(s); {
			sym, l := e.match(s[i:])
			var cur key
			if l == 0 {
				cur = key{uint64(s[i]), 1}
				l = 1
			} else {
				cur = key{sym, l}
			}
			counts[cur]++
			if cur.len > 1 {
				// The first byte alone stays a candidate too.
				counts[key{uint64(s[i]), 1}]++
			}
			if havePrev {
				if tl := prev.len + cur.len; tl <= 8 {
					joined := prev.sym | cur.sym<<(8*uint(prev.len))
					counts[key{joined, tl}]++
				}
			}
			prev, havePrev = cur, true
			i += int(l)
		}
	}
	out := make([]candidate, 0, len(counts))
	for k, c := range counts {
		g := c * int(k.len)
		if k.len == 1 {
			// Single bytes are favoured: each one kept avoids an escape,
			// and they keep the exception rate down (as FSST does).
			g *= 8
		}
		out = append(out, candidate{k.sym, k.len, g})
	}
	return out
}

func (e *Encoder) build(cands []candidate) {
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].gain != cands[j].gain {
			return cands[i].gain > cands[j].gain
		}
		if cands[i].len != cands[j].len {
			return cands[i].len > cands[j].len
		}
		return cands[i].sym < cands[j].sym
	})
	e.n = 0
	for i := range e.index {
		e.index[i] = e.index[i][:0]
	}
	for _, c := range cands {
		if e.n == 255 {
			break
		}
		if c.gain <= 0 {
			break
		}
		e.syms[e.n], e.lens[e.n] = c.sym, c.len
		e.n++
	}
	for code := 0; code < e.n; code++ {
		b := byte(e.syms[code])
		e.index[b] = append(e.index[b], uint8(code))
	}
	for b := range e.index {
		idx := e.index[b]
		sort.Slice(idx, func(i, j int) bool { return e.lens[idx[i]] > e.lens[idx[j]] })
	}
	e.one = [256]uint16{}
	if e.two == nil {
		e.two = make([]uint16, 1<<16)
	} else {
		clear(e.two)
	}
	if e.longHead == nil {
		e.longHead = make([]uint8, 1<<16)
	} else {
		clear(e.longHead)
	}
	e.longNext = [255]uint8{}
	var long []uint8
	for code := 0; code < e.n; code++ {
		switch l := e.lens[code]; {
		case l == 1:
			e.one[byte(e.syms[code])] = uint16(code) + 1
		case l == 2:
			e.two[uint16(e.syms[code])] = uint16(code) + 1
		default:
			long = append(long, uint8(code))
		}
	}
	// Chain each prefix's symbols longest first: insert shortest first at
	// the head.
	sort.Slice(long, func(i, j int) bool { return e.lens[long[i]] < e.lens[long[j]] })
	for _, c := range long {
		k := uint16(e.syms[c])
		e.longNext[c] = e.longHead[k]
		e.longHead[k] = c + 1
	}
}

var masks = [9]uint64{0, 0xff, 0xffff, 0xffffff, 0xffffffff, 0xffffffffff, 0xffffffffffff, 0xffffffffffffff, ^uint64(0)}

func load(s []byte) uint64 {
	if len(s) >= 8 {
		return binary.LittleEndian.Uint64(s)
	}
	var v uint64
	for i := len(s) - 1; i >= 0; i-- {
		v = v<<8 | uint64(s[i])
	}
	return v
}

// match returns the longest symbol that prefixes s, or length 0.
func (e *Encoder) match(s []byte) (uint64, uint8) {
	if len(s) == 0 {
		return 0, 0
	}
	idx := e.index[s[0]]
	v := load(s)
	for _, c := range idx {
		l := int(e.lens[c])
		if l <= len(s) && v&masks[l] == e.syms[c] {
			return e.syms[c], e.lens[c]
		}
	}
	return 0, 0
}

// AppendEncode appends the compression of one string to dst: at each
// position the longest symbol that matches, else an escaped byte.
func (e *Encoder) AppendEncode(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		rest := s[i:]
		if len(rest) >= 2 {
			k := binary.LittleEndian.Uint16(rest)
			if h := e.longHead[k]; h != 0 {
				v := load(rest)
				found := false
				for c := h; c != 0; c = e.longNext[c-1] {
					l := int(e.lens[c-1])
					if l <= len(rest) && v&masks[l] == e.syms[c-1] {
						dst = append(dst, c-1)
						i += l
						found = true
						break
					}
				}
				if found {
					continue
				}
			}
			if c := e.two[k]; c != 0 {
				dst = append(dst, byte(c-1))
				i += 2
				continue
			}
		}
		if c := e.one[rest[0]]; c != 0 {
			dst = append(dst, byte(c-1))
			i++
			continue
		}
		dst = append(dst, Escape, rest[0])
		i++
	}
	return dst
}

// EncodeAll compresses each string data[offsets[i]:offsets[i+1]] and returns
// the codes with their offsets (starting at 0).
func (e *Encoder) EncodeAll(data []byte, offsets []uint64) ([]byte, []uint64) {
	out := make([]byte, 0, len(data)/2+16)
	outOff := make([]uint64, len(offsets))
	for i := 1; i < len(offsets); i++ {
		out = e.AppendEncode(out, data[offsets[i-1]:offsets[i]])
		outOff[i] = uint64(len(out))
	}
	return out, outOff
}

// Table serializes the symbol table in the layout ParseTable reads, marked
// as compressed.
func (e *Encoder) Table() []byte {
	b := make([]byte, SymbolTableSize)
	h := Magic | 1<<24 | uint64(e.n)
	binary.LittleEndian.PutUint64(b, h)
	for i := 0; i < e.n; i++ {
		binary.LittleEndian.PutUint64(b[8+8*i:], e.syms[i])
	}
	for i := 0; i < e.n; i++ {
		b[8+8*e.n+i] = e.lens[i]
	}
	return b
}
