package chunker

import (
	"slices"
	"strings"
)

type fixedChars struct{ size, overlap int }

func (f fixedChars) Chunk(text string, dst []string) []string {
	return cutChars(text, f.size, f.size-f.overlap, false, dst)
}

// cutChars appends the fixed-rule chunks of text, measured in code points,
// as substrings of text; with trim they are trimmed and empties dropped. It
// allocates nothing beyond growing dst.
func cutChars(text string, size, step int, trim bool, dst []string) []string {
	if text == "" {
		return dst
	}
	if !trim {
		// Exact for ASCII; an upper bound otherwise (code points <= bytes).
		dst = slices.Grow(dst, numCuts(len(text), size, step))
	}
	add := func(chunk string) {
		if trim {
			dst = appendTrimmed(dst, chunk)
		} else {
			dst = append(dst, chunk)
		}
	}
	if isASCII(text) {
		for start := 0; ; start += step {
			add(text[start:min(start+size, len(text))])
			if start+size >= len(text) {
				return dst
			}
		}
	}
	// A chunk reaches the end of the text exactly when its end cursor runs
	// into it, so the code points need not be counted first.
	overlap := size - step
	if step >= overlap {
		// Single pass: the end cursor passes the next chunk's start
		// (overlap code points before its own next stop) on its way.
		sb, next := 0, advanceRunes(text, 0, step)
		eb := advanceRunes(text, next, overlap)
		for {
			add(text[sb:eb])
			if eb == len(text) {
				return dst
			}
			sb = next
			next = advanceRunes(text, eb, step-overlap)
			eb = advanceRunes(text, next, overlap)
		}
	}
	// Overlap above half the size: the start cursor walks on its own.
	sb, eb := 0, advanceRunes(text, 0, size)
	for {
		add(text[sb:eb])
		if eb == len(text) {
			return dst
		}
		sb = advanceRunes(text, sb, step)
		eb = advanceRunes(text, eb, step)
	}
}

type fixedWords struct{ size, overlap int }

func (f fixedWords) Chunk(text string, dst []string) []string {
	return cutWords(text, f.size, f.size-f.overlap, true, dst)
}

// cutWords appends the fixed-rule chunks of text measured in words. With
// join each chunk is its words joined by single ASCII spaces; otherwise it
// is the substring of text from its first word to its last.
func cutWords(text string, size, step int, join bool, dst []string) []string {
	n := countWords(text)
	if n == 0 {
		return dst
	}
	dst = slices.Grow(dst, numCuts(n, size, step))
	// The trailing cursor is at word ti, which starts at byte tb; the leading
	// cursor has passed li words, the last of which ends at byte lb.
	tb, _ := nextWord(text, 0)
	ti, lb, li := 0, 0, 0
	for {
		target := min(ti+size, n)
		for ; li < target; li++ {
			_, lb = nextWord(text, lb)
		}
		if join {
			dst = append(dst, joinWords(text[tb:lb]))
		} else {
			dst = append(dst, text[tb:lb])
		}
		if ti+size >= n {
			return dst
		}
		pos := tb
		for k := 0; k < step; k++ {
			_, pos = nextWord(text, pos)
		}
		tb, _ = nextWord(text, pos)
		ti += step
	}
}

// joinWords returns the words of span (which starts and ends with a word)
// joined by single ASCII spaces, reusing span when it is already so joined.
func joinWords(span string) string {
	clean, prevSpace := true, false
	for i := 0; i < len(span); {
		space, w := spaceAt(span, i)
		if space && (prevSpace || span[i] != ' ') {
			clean = false
			break
		}
		prevSpace = space
		i += w
	}
	if clean {
		return span
	}
	var b strings.Builder
	b.Grow(len(span))
	for i := 0; ; {
		s, e := nextWord(span, i)
		if s == e {
			return b.String()
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(span[s:e])
		i = e
	}
}

// hardCut appends the fixed-rule chunks of text for the recursive and
// sentence strategies: substrings of text, trimmed, empties dropped.
func hardCut(text string, size, overlap int, u unit, dst []string) []string {
	if u == unitWords {
		return cutWords(text, size, size-overlap, false, dst)
	}
	return cutChars(text, size, size-overlap, true, dst)
}
