package chunker

type sentence struct {
	size, overlap int
	unit          unit
}

// span is a trimmed sentence: bytes [a, b) of the text, and its start and end
// positions counted in units from the start of the text.
type span struct{ a, b, ua, ub int }

func (s sentence) Chunk(text string, dst []string) []string {
	if text == "" {
		return dst
	}
	sents := splitSentences(text, s.unit)
	width := func(i, j int) int { return sents[j].ub - sents[i].ua } // units of sentences i..j with the text between
	first := -1                                                      // the open chunk is sents[first:k]; -1 when none
	for k, sn := range sents {
		if sn.ub-sn.ua > s.size {
			if first >= 0 {
				dst = append(dst, text[sents[first].a:sents[k-1].b])
				first = -1
			}
			dst = hardCut(text[sn.a:sn.b], s.size, s.overlap, s.unit, dst)
			continue
		}
		if first < 0 {
			first = k
			continue
		}
		if width(first, k) <= s.size {
			continue
		}
		dst = append(dst, text[sents[first].a:sents[k-1].b])
		// Carry the longest run of trailing sentences within the overlap that
		// still leaves room for sentence k.
		c := k
		for c > first && width(c-1, k-1) <= s.overlap && width(c-1, k) <= s.size {
			c--
		}
		first = c
	}
	if first >= 0 {
		dst = append(dst, text[sents[first].a:sents[len(sents)-1].b])
	}
	return dst
}

// splitSentences returns the sentences of text, trimmed, empties dropped. A
// sentence ends after '.', '!' or '?' followed by white space or the end of
// the text, and before a blank line (a newline whose line holds only white
// space).
func splitSentences(text string, u unit) []span {
	var out []span
	cur := span{a: -1}
	pos, words, inWord := 0, 0, false // code points and words before byte i
	for i := 0; i < len(text); {
		space, w := spaceAt(text, i)
		if space {
			if text[i] == '\n' && cur.a >= 0 && blankLineAfter(text, i+1) {
				out = append(out, cur)
				cur.a = -1
			}
			inWord = false
		} else {
			if !inWord {
				words++
				inWord = true
			}
			if cur.a < 0 {
				cur.a = i
				cur.ua = pos
				if u == unitWords {
					cur.ua = words - 1
				}
			}
			cur.b, cur.ub = i+w, pos+1
			if u == unitWords {
				cur.ub = words
			}
			if c := text[i]; (c == '.' || c == '!' || c == '?') && (i+w == len(text) || nextIsSpace(text, i+w)) {
				out = append(out, cur)
				cur.a = -1
			}
		}
		pos++
		i += w
	}
	if cur.a >= 0 {
		out = append(out, cur)
	}
	return out
}

func nextIsSpace(s string, i int) bool {
	space, _ := spaceAt(s, i)
	return space
}

// blankLineAfter reports whether s[i:] holds only white space up to the next
// newline, i.e. whether the line starting at i is blank.
func blankLineAfter(s string, i int) bool {
	for i < len(s) {
		if s[i] == '\n' {
			return true
		}
		space, w := spaceAt(s, i)
		if !space {
			return false
		}
		i += w
	}
	return false
}
