package chunker

import (
	"strings"
	"sync"
)

type recursive struct {
	size, overlap int
	unit          unit
	seps          []string
}

// piece is a byte span [a, b) of the text being split and its length in units.
type piece struct{ a, b, n int }

func (r *recursive) Chunk(text string, dst []string) []string {
	if text == "" {
		return dst
	}
	if countUnits(text, r.unit) <= r.size {
		return appendTrimmed(dst, text)
	}
	scratch := piecePool.Get().(*[]piece)
	dst = r.split(text, r.seps, dst, scratch)
	piecePool.Put(scratch)
	return dst
}

// piecePool holds the piece lists split fills, one per Chunk call: a
// Chunker may be shared by goroutines, and a text's pieces are garbage
// once its chunks are cut.
var piecePool = sync.Pool{New: func() any { return new([]piece) }}

// split cuts text, which is longer than size, on the first of seps that
// occurs in it, then merges the pieces; pieces still too long are split
// with the separators after that one, or cut at fixed positions. The
// pieces are gathered in *scratch, which a nested split reuses: the
// pieces before a too-long one are merged before it is split, so nothing
// gathered is read after the nested call.
func (r *recursive) split(text string, seps []string, dst []string, scratch *[]piece) []string {
	var sep string
	var rest []string
	for i, s := range seps {
		if strings.Contains(text, s) {
			sep, rest = s, seps[i+1:]
			break
		}
	}
	if sep == "" {
		return hardCut(text, r.size, r.overlap, r.unit, dst)
	}
	good := (*scratch)[:0]
	for a := 0; a < len(text); {
		b := len(text)
		if i := strings.Index(text[a:], sep); i >= 0 {
			b = a + i + len(sep) // the separator stays with the piece it ends
		}
		p := text[a:b]
		if n := countUnits(p, r.unit); n <= r.size {
			good = append(good, piece{a, b, n})
		} else {
			dst = r.merge(text, good, dst)
			if cap(good) > cap(*scratch) {
				*scratch = good
			}
			good = good[:0]
			if len(rest) > 0 {
				dst = r.split(p, rest, dst, scratch)
			} else {
				dst = hardCut(p, r.size, r.overlap, r.unit, dst)
			}
		}
		a = b
	}
	if cap(good) > cap(*scratch) {
		*scratch = good
	}
	return r.merge(text, good, dst)
}

// merge greedily packs consecutive pieces of text into chunks of at most size
// units, starting each chunk after the first with the trailing pieces of the
// previous one that total at most overlap units. Because the pieces are
// contiguous, every chunk is a substring of text.
func (r *recursive) merge(text string, pieces []piece, dst []string) []string {
	first, total := 0, 0 // the open chunk is pieces[first:j]
	done := 0            // byte offset in text up to which chunks were emitted
	emit := func(a, b int) {
		// Skip a chunk that adds nothing but white space to the previous one.
		if strings.TrimSpace(text[max(a, done):b]) == "" {
			return
		}
		dst = appendTrimmed(dst, text[a:b])
		done = b
	}
	for j, p := range pieces {
		if j > first && total+p.n > r.size {
			emit(pieces[first].a, pieces[j-1].b)
			for first < j && (total > r.overlap || total+p.n > r.size) {
				total -= pieces[first].n
				first++
			}
		}
		total += p.n
	}
	if first < len(pieces) {
		emit(pieces[first].a, pieces[len(pieces)-1].b)
	}
	return dst
}
