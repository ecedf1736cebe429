package fsst

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	textcorpus "github.com/mvq-dev/mvq/internal/corpus"
)

// countRef is count as it was first written, one map update per token:
// the reference count's arrays must agree with.
func (e *Encoder) countRef(sample [][]byte) []candidate {
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
			g *= 8
		}
		out = append(out, candidate{k.sym, k.len, g})
	}
	return out
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

func sortedCands(c []candidate) []candidate {
	c = slices.Clone(c)
	slices.SortFunc(c, func(a, b candidate) int {
		if a.len != b.len {
			return int(a.len) - int(b.len)
		}
		if a.sym != b.sym {
			if a.sym < b.sym {
				return -1
			}
			return 1
		}
		return a.gain - b.gain
	})
	return c
}

func docs(n int) ([]byte, []uint64) {
	var data []byte
	offs := []uint64{0}
	for i := range n {
		data = append(data, textcorpus.Doc(i, 2048)...)
		offs = append(offs, uint64(len(data)))
	}
	return data, offs
}

// TestCountMatchesReference: every round of Train sees the same
// candidates, with the same gains, as the map-based reference, and the
// tables come out byte for byte the same.
func TestCountMatchesReference(t *testing.T) {
	type input struct {
		name string
		data []byte
		offs []uint64
	}
	var ins []input
	for _, n := range []int{1, 10, 5000} {
		d, o := corpus(n, int64(n))
		ins = append(ins, input{fmt.Sprint("words", n), d, o})
	}
	d, o := docs(40)
	ins = append(ins, input{"docs", d, o})
	long := []byte(strings.Repeat("abcdefghij", 3000))
	ins = append(ins, input{"repeat", long, []uint64{0, uint64(len(long))}})
	bin := make([]byte, 1<<15)
	for i := range bin {
		bin[i] = byte(i * 7919 >> 3)
	}
	ins = append(ins, input{"bytes", bin, []uint64{0, 100, uint64(len(bin))}})
	for _, in := range ins {
		t.Run(in.name, func(t *testing.T) {
			sample := sampleStrings(in.data, in.offs)
			e, ref := &Encoder{}, &Encoder{}
			tl := &tally{pairs: make([]uint32, 512*512)}
			for gen, frac := range trainFracs {
				part := sampleFrac(sample, frac, nil)
				got, want := sortedCands(e.count(tl, part)), sortedCands(ref.countRef(part))
				if !slices.Equal(got, want) {
					t.Fatalf("round %d: %d candidates, reference %d", gen, len(got), len(want))
				}
				// top is the head of the full sort build used to make.
				all := slices.Clone(want)
				sort.Slice(all, func(i, j int) bool { return better(all[i], all[j]) })
				if n := min(len(all), 255); !slices.Equal(top(slices.Clone(got)), all[:n]) {
					t.Fatalf("round %d: top differs from the first %d of the sorted candidates", gen, n)
				}
				e.build(got)
				ref.build(want)
			}
			if string(e.Table()) != string(ref.Table()) {
				t.Fatal("tables differ")
			}
			if tr := Train(in.data, in.offs); string(tr.Table()) != string(ref.Table()) {
				t.Fatal("Train's table differs from the reference")
			}
		})
	}
}

// BenchmarkTrain: one page of chunk text (about 2.4 MB, the output of a
// refresh work item).
func BenchmarkTrain(b *testing.B) {
	data, offs := docs(1024)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		Train(data, offs)
	}
}

// BenchmarkTrainReference is BenchmarkTrain with the map-based count, the
// baseline of the same run.
func BenchmarkTrainReference(b *testing.B) {
	data, offs := docs(1024)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		sample := sampleStrings(data, offs)
		e := &Encoder{}
		for _, frac := range trainFracs {
			e.build(e.countRef(sampleFrac(sample, frac, nil)))
		}
	}
}
