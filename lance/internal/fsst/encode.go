package fsst

import (
	"encoding/binary"
	"slices"
	"sort"
	"sync"
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

// maxSample bounds the bytes the table is trained on: 16 KiB, FSST's own
// sample target (and the Lance writer's). A table is trained per page, so
// a writer of many small files (a refresh's work items) trains often;
// 64 KiB cost 4x the training for files 0.4% smaller (the scalars of
// lance/file's size test against LanceDB: 1.018 to 1.023 of LanceDB's).
const maxSample = 1 << 14

// Train builds a symbol table from the strings data[offsets[i]:offsets[i+1]].
// Offsets must be non-decreasing and within data.
func Train(data []byte, offsets []uint64) *Encoder {
	sample := sampleStrings(data, offsets)
	e := &Encoder{}
	t := tallies.Get().(*tally)
	defer tallies.Put(t)
	part := make([][]byte, 0, len(sample))
	for _, frac := range trainFracs {
		e.build(e.count(t, sampleFrac(sample, frac, part)))
	}
	return e
}

// trainFracs are the rounds of training, as FSST's: each counts a growing
// share (in 128ths) of the sample with the table of the round before, so
// the early rounds, whose tables are rough anyway, are cheap. Five rounds
// over 2.65 samples' worth of strings instead of eight over eight: 0.4x
// the training for files within 0.1% of the size.
var trainFracs = [...]int{8, 38, 68, 98, 128}

// sampleFrac is the strings of sample whose index hashes below frac/128
// (all of them at 128), appended to out[:0]: the same strings for the
// same sample every time.
func sampleFrac(sample [][]byte, frac int, out [][]byte) [][]byte {
	if frac >= 128 {
		return sample
	}
	out = out[:0]
	for i, s := range sample {
		if int(uint32(i)*2654435761>>25) < frac {
			out = append(out, s)
		}
	}
	if len(out) == 0 && len(sample) > 0 {
		out = append(out, sample[0])
	}
	return out
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
//
// A token is a code (0..254) or an escaped byte (256+b); tokens and pairs
// of tokens are counted in arrays (t.pairs) and only the distinct ones are
// merged by their bytes (two pairs, or a pair and a symbol, can spell the
// same candidate), which is what makes a round cheap next to a map update
// per token.
func (e *Encoder) count(t *tally, sample [][]byte) []candidate {
	clear(t.one[:])
	clear(t.first[:])
	for _, p := range t.touched {
		t.pairs[p] = 0
	}
	t.touched = t.touched[:0]
	for _, s := range sample {
		prev := -1
		for i := 0; i < len(s); {
			tok, l := 256+int(s[i]), 1
			if c := e.matchCode(s[i:]); c >= 0 {
				tok, l = c, int(e.lens[c])
				if l > 1 {
					// The first byte alone stays a candidate too.
					t.first[s[i]]++
				}
			}
			t.one[tok]++
			if prev >= 0 {
				p := prev<<9 | tok
				if t.pairs[p] == 0 {
					t.touched = append(t.touched, int32(p))
				}
				t.pairs[p]++
			}
			prev = tok
			i += l
		}
	}
	key := func(tok int) (uint64, uint8) {
		if tok >= 256 {
			return uint64(tok - 256), 1
		}
		return e.syms[tok], e.lens[tok]
	}
	t.reset(len(t.touched) + 768)
	for tok, c := range t.one {
		if c != 0 {
			sym, l := key(tok)
			t.add(sym, l, c)
		}
	}
	for b, c := range t.first {
		if c != 0 {
			t.add(uint64(b), 1, c)
		}
	}
	for _, p := range t.touched {
		sa, la := key(int(p >> 9))
		sb, lb := key(int(p & 511))
		if tl := la + lb; tl <= 8 {
			t.add(sa|sb<<(8*uint(la)), tl, t.pairs[p])
		}
	}
	out := t.cands[:0]
	for i, c := range t.counts {
		if c == 0 {
			continue
		}
		k := t.keys[i]
		g := int(c) * int(k.len)
		if k.len == 1 {
			// Single bytes are favoured: each one kept avoids an escape,
			// and they keep the exception rate down (as FSST does).
			g *= 8
		}
		out = append(out, candidate{k.sym, k.len, g})
	}
	t.cands = out
	return out
}

// symKey is a candidate symbol: its bytes (little-endian) and length.
type symKey struct {
	sym uint64
	len uint8
}

// tally is the counters of count, kept across the rounds of one Train
// and pooled across Trains (count clears what the last round counted).
type tally struct {
	one     [512]uint32 // by token
	first   [256]uint32 // first bytes of matched symbols longer than one
	pairs   []uint32    // by prev<<9 | next token
	touched []int32     // the pairs counted this round
	// The candidates merged by their bytes: an open-addressing hash table
	// (count 0: an empty slot) of a power of two slots, at most half full.
	keys   []symKey
	counts []uint32
	n      int
	cands  []candidate // count's result, reused by the next round
}

var tallies = sync.Pool{New: func() any { return &tally{pairs: make([]uint32, 512*512)} }}

// reset empties the candidate table, sized for up to n candidates.
func (t *tally) reset(n int) {
	size := 1024
	for size < 2*n {
		size *= 2
	}
	if len(t.keys) < size {
		t.keys, t.counts = make([]symKey, size), make([]uint32, size)
	} else {
		clear(t.counts)
	}
	t.n = 0
}

// add adds c to the count of candidate (sym, l).
func (t *tally) add(sym uint64, l uint8, c uint32) {
	mask := uint64(len(t.keys) - 1)
	i := ((sym ^ uint64(l)<<59) * 0x9E3779B97F4A7C15 >> 32) & mask
	for t.counts[i] != 0 {
		if t.keys[i] == (symKey{sym, l}) {
			t.counts[i] += c
			return
		}
		i = (i + 1) & mask
	}
	t.keys[i], t.counts[i] = symKey{sym, l}, c
	t.n++
}

// matchCode returns the code of the longest symbol that prefixes s, or -1,
// found as AppendEncode finds it.
func (e *Encoder) matchCode(s []byte) int {
	if e.two == nil { // no table yet
		return -1
	}
	if len(s) >= 2 {
		k := binary.LittleEndian.Uint16(s)
		if h := e.longHead[k]; h != 0 {
			v := load(s)
			for c := h; c != 0; c = e.longNext[c-1] {
				if l := int(e.lens[c-1]); l <= len(s) && v&masks[l] == e.syms[c-1] {
					return int(c - 1)
				}
			}
		}
		if c := e.two[k]; c != 0 {
			return int(c - 1)
		}
	}
	return int(e.one[s[0]]) - 1
}

// better orders candidates by gain, then length, then bytes (a total
// order: the candidates of a round are distinct).
func better(a, b candidate) bool {
	if a.gain != b.gain {
		return a.gain > b.gain
	}
	if a.len != b.len {
		return a.len > b.len
	}
	return a.sym < b.sym
}

// top returns the best (by better) up to 255 candidates of positive gain,
// best first, reordering cands: a heap of the best so far, whose worst
// is at the root, instead of sorting all of them.
func top(cands []candidate) []candidate {
	h := cands[:0]
	down := func(i int) {
		for {
			w, l, r := i, 2*i+1, 2*i+2
			if l < len(h) && better(h[w], h[l]) {
				w = l
			}
			if r < len(h) && better(h[w], h[r]) {
				w = r
			}
			if w == i {
				return
			}
			h[i], h[w] = h[w], h[i]
			i = w
		}
	}
	for _, c := range cands {
		switch {
		case c.gain <= 0:
		case len(h) < 255:
			h = append(h, c)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if !better(h[p], h[i]) {
					break
				}
				h[i], h[p] = h[p], h[i]
				i = p
			}
		case better(c, h[0]):
			h[0] = c
			down(0)
		}
	}
	slices.SortFunc(h, func(a, b candidate) int {
		switch {
		case better(a, b):
			return -1
		case better(b, a):
			return 1
		}
		return 0
	})
	return h
}

func (e *Encoder) build(cands []candidate) {
	e.n = 0
	for i := range e.index {
		e.index[i] = e.index[i][:0]
	}
	for _, c := range top(cands) {
		e.syms[e.n], e.lens[e.n] = c.sym, c.len
		e.n++
	}
	e.lookups()
}

// lookups builds the encoding lookups of the symbols e.syms[:e.n].
func (e *Encoder) lookups() {
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

// AppendEncode appends the compression of one string to dst: at each
// position the longest symbol that matches, else an escaped byte.
func (e *Encoder) AppendEncode(dst, s []byte) []byte {
	// Where eight bytes remain, one load serves every comparison and the
	// codes go to a buffer grown once (at most two bytes per input byte).
	n := len(dst)
	out := slices.Grow(dst, 2*len(s))[:n+2*len(s)]
	i := 0
	for i+8 <= len(s) {
		v := binary.LittleEndian.Uint64(s[i:])
		k := uint16(v)
		if c := e.longHead[k]; c != 0 {
			for ; c != 0; c = e.longNext[c-1] {
				if v&masks[e.lens[c-1]] == e.syms[c-1] {
					break
				}
			}
			if c != 0 {
				out[n] = c - 1
				n++
				i += int(e.lens[c-1])
				continue
			}
		}
		if c := e.two[k]; c != 0 {
			out[n] = byte(c - 1)
			n++
			i += 2
			continue
		}
		if c := e.one[byte(v)]; c != 0 {
			out[n] = byte(c - 1)
			n++
			i++
			continue
		}
		out[n], out[n+1] = Escape, byte(v)
		n += 2
		i++
	}
	return e.appendTail(out[:n], s[i:])
}

// appendTail is AppendEncode one position at a time, for the last bytes
// of a string (and, in tests, the reference the fast loop must match).
func (e *Encoder) appendTail(dst, s []byte) []byte {
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
