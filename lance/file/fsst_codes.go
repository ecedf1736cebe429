package file

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/lance/internal/fsst"
)

// FSST codes that travel with string arrays.
//
// A reader asked to (Reader.KeepFSST) leaves, beside each string array it
// decodes from FSST-compressed blocks under one symbol table (one page, or
// pages written with shared tables), the values' codes and the table.
// Whoever makes substrings of those values (a text chunker) cuts their
// codes with a CodeCutter and attaches the cuts to the array of
// substrings it builds. A writer whose page holds only values
// with codes under one table writes those codes as the page's compressed
// values, with that table, instead of compressing the values again, which
// is most of the cost of writing text. The codes are kept off to the side,
// keyed weakly by the array's value buffer (shared by its slices), so that
// Arrow arrays stay plain and an array that is copied simply loses them.

// arrayCodes are the codes of the values of the arrays over one value
// buffer: value i (of the array at offset 0) is codes[offs[i]:offs[i+1]].
type arrayCodes struct {
	table []byte // serialized symbol table
	codes []byte
	offs  []uint64

	once   sync.Once
	parsed *fsst.Table
	enc    *fsst.Encoder
	err    error
}

// encoder parses the table and builds its encoder, once per arrayCodes
// (a read's arrays; a work item's chunk goroutines share it).
func (c *arrayCodes) encoder() (*fsst.Table, *fsst.Encoder, error) {
	c.once.Do(func() {
		if c.parsed, c.err = fsst.ParseTable(c.table); c.err == nil {
			c.enc, c.err = fsst.NewEncoder(c.parsed)
		}
	})
	return c.parsed, c.enc, c.err
}

// codeHints holds the codes of the arrays that have them, by a weak
// pointer to the array's value buffer: it keeps no buffer alive, and an
// entry goes when its buffer does (attachCodes' cleanup). A weak pointer
// never equals one to a later object at the same address.
var codeHints sync.Map // weak.Pointer[memory.Buffer] -> *arrayCodes

func attachCodes(buf *memory.Buffer, c *arrayCodes) {
	k := weak.Make(buf)
	codeHints.Store(k, c)
	runtime.AddCleanup(buf, func(k weak.Pointer[memory.Buffer]) { codeHints.Delete(k) }, k)
}

// DropCodes forgets the codes that came with arr's values (and its
// slices'), once nothing will write or cut them: without it they go only
// a collection after the array, which holds a work item's codes in memory
// well past its end.
func DropCodes(arr arrow.Array) {
	if arr == nil {
		return
	}
	if bufs := arr.Data().Buffers(); len(bufs) > 2 && bufs[2] != nil {
		codeHints.Delete(weak.Make(bufs[2]))
	}
}

// codesOf returns the codes of arr's values and arr's first value's index
// in them, or nil.
func codesOf(arr arrow.Array) (*arrayCodes, int) {
	d := arr.Data()
	bufs := d.Buffers()
	if len(bufs) < 3 || bufs[2] == nil {
		return nil, 0
	}
	v, ok := codeHints.Load(weak.Make(bufs[2]))
	if !ok {
		return nil, 0
	}
	c := v.(*arrayCodes)
	if d.Offset()+d.Len() >= len(c.offs) {
		return nil, 0
	}
	return c, d.Offset()
}

// precodedPages counts the pages written from attached codes.
var precodedPages atomic.Int64

// PrecodedPages is how many pages this process has written with codes
// that came with their values (for tests and benchmarks).
func PrecodedPages() int64 { return precodedPages.Load() }

// CodeCutter cuts the codes of the values of a string array read with
// KeepFSST into the codes of substrings of those values; Attach hands the
// cuts to the array the substrings were appended to, in the same order.
// A nil CodeCutter cuts nothing; any value it cannot cut (no codes, another
// table, a substring not within its value) leaves the array without
// codes, which a writer then compresses as usual.
type CodeCutter struct {
	src    *arrayCodes
	first  int
	cutter *fsst.Cutter
	doc    string
	ok     bool // the current document's codes are loaded
	out    []byte
	offs   []uint64
	bad    bool
}

// NewCodeCutter returns a cutter of substrings of src's values, or nil
// when src came without codes.
func NewCodeCutter(src arrow.Array) *CodeCutter {
	c, first := codesOf(src)
	if c == nil {
		return nil
	}
	t, enc, err := c.encoder()
	if err != nil {
		return nil
	}
	return &CodeCutter{src: c, first: first, cutter: fsst.NewCutter(t, enc), offs: []uint64{0}}
}

// Reserve makes room for the codes of n more bytes of substrings, so the
// codes are not copied as they grow.
func (k *CodeCutter) Reserve(n int) {
	if k == nil {
		return
	}
	// Text compresses to about half; a little over that.
	if want := len(k.out) + n*5/8; cap(k.out) < want {
		k.out = append(make([]byte, 0, want), k.out...)
	}
}

// Value makes value i of the source array, whose text is doc, the one the
// next cuts come from.
func (k *CodeCutter) Value(i int, doc string) {
	if k == nil || k.bad {
		return
	}
	j := k.first + i
	k.ok = false
	if j+1 >= len(k.src.offs) {
		k.bad = true
		return
	}
	if err := k.cutter.Reset(k.src.codes[k.src.offs[j]:k.src.offs[j+1]]); err != nil || k.cutter.Len() != len(doc) {
		k.bad = true
		return
	}
	k.doc, k.ok = doc, true
}

// Cut appends the codes of s, a substring of the current value's text (it
// must share the text's bytes, as a Go substring does).
func (k *CodeCutter) Cut(s string) {
	if k == nil || k.bad {
		return
	}
	a, ok := substringAt(k.doc, s)
	if !k.ok || !ok {
		k.bad = true
		return
	}
	var err error
	if k.out, err = k.cutter.AppendCut(k.out, k.doc, a, a+len(s)); err != nil {
		k.bad = true
		return
	}
	k.offs = append(k.offs, uint64(len(k.out)))
}

// Attach gives the cuts so far to arr (whose values are the substrings,
// in order) and starts over for the next array. It reports whether arr
// got codes.
func (k *CodeCutter) Attach(arr arrow.Array) bool {
	if k == nil {
		return false
	}
	out, offs, bad := k.out, k.offs, k.bad
	k.out, k.offs, k.bad = nil, []uint64{0}, false
	bufs := arr.Data().Buffers()
	if bad || arr.Data().Offset() != 0 || arr.Len() != len(offs)-1 || len(bufs) < 3 || bufs[2] == nil {
		return false
	}
	attachCodes(bufs[2], &arrayCodes{table: k.src.table, codes: out, offs: offs})
	return true
}

// substringAt is where s starts in doc when s's bytes are doc's.
func substringAt(doc, s string) (int, bool) {
	if len(s) == 0 {
		return 0, true
	}
	if len(doc) == 0 {
		return 0, false
	}
	d := uintptrOf(doc)
	p := uintptrOf(s)
	if p < d || p+uintptr(len(s)) > d+uintptr(len(doc)) {
		return 0, false
	}
	return int(p - d), true
}

// sinkCodes are the codes a varSink's values came with, while every array
// appended to it had codes under one table.
type sinkCodes struct {
	table []byte
	codes []byte
	offs  []uint64 // from 0, one per value and one more
	bad   bool
}

// add appends the codes of arr's n values (or marks the sink's codes
// unusable).
func (p *sinkCodes) add(arr arrow.Array, n int, first bool) {
	if p.bad {
		return
	}
	c, off := codesOf(arr)
	if c == nil || (!first && !sameTable(p.table, c.table)) {
		p.bad = true
		return
	}
	if first {
		p.table, p.offs = c.table, []uint64{0}
	}
	base, end := c.offs[off], c.offs[off+n]
	start := uint64(len(p.codes))
	if first {
		// The array's own codes, not a copy (a page is most often one
		// array); the capacity is cut so that a second array's copies.
		p.codes = c.codes[base:end:end]
	} else {
		p.codes = append(p.codes, c.codes[base:end]...)
	}
	p.offs = c.appendEnds(p.offs, start, off, off+n)
}

// appendEnds appends to offs where values from+1 to to of c end, for
// their codes placed from start on (value from's at start).
func (c *arrayCodes) appendEnds(offs []uint64, start uint64, from, to int) []uint64 {
	base := c.offs[from]
	for i := from + 1; i <= to; i++ {
		offs = append(offs, start+c.offs[i]-base)
	}
	return offs
}

func sameTable(a, b []byte) bool {
	if len(a) == len(b) && len(a) > 0 && &a[0] == &b[0] {
		return true
	}
	return bytes.Equal(a, b)
}

func uintptrOf(s string) uintptr { return uintptr(unsafe.Pointer(unsafe.StringData(s))) }
