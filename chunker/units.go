package chunker

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

type unit uint8

const (
	unitChars unit = iota // Unicode code points; an invalid UTF-8 byte is one
	unitWords             // maximal runs of non-space characters
)

// asciiSpace matches unicode.IsSpace on ASCII bytes.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

// spaceAt reports whether the code point at s[i] is white space, and its
// width in bytes (1 for an invalid byte, which is never space).
func spaceAt(s string, i int) (space bool, width int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiSpace[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return unicode.IsSpace(r), w
}

// ascii8 reports whether the 8 bytes at s[i:] are all ASCII.
func ascii8(s string, i int) bool {
	x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
	return x&0x8080808080808080 == 0
}

func isASCII(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if !ascii8(s, i) {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func countWords(s string) int {
	n, inWord := 0, false
	for i := 0; i < len(s); {
		space, w := spaceAt(s, i)
		if !space && !inWord {
			n++
		}
		inWord = !space
		i += w
	}
	return n
}

func countUnits(s string, u unit) int {
	if u == unitWords {
		return countWords(s)
	}
	return runeCount(s)
}

// runeCount is utf8.RuneCountInString (an invalid byte counts as one),
// eight ASCII bytes at a time: the chunker counts the code points of every
// text and of every piece it considers, and texts are mostly ASCII.
func runeCount(s string) int {
	n, i := 0, 0
	for i < len(s) {
		if i+8 <= len(s) && ascii8(s, i) {
			n += 8
			i += 8
			continue
		}
		if s[i] < utf8.RuneSelf {
			i++
		} else {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
		}
		n++
	}
	return n
}

// nextWord returns the byte span of the first word at or after s[i:], or
// (len(s), len(s)) when there is none.
func nextWord(s string, i int) (start, end int) {
	for i < len(s) {
		space, w := spaceAt(s, i)
		if !space {
			break
		}
		i += w
	}
	start = i
	for i < len(s) {
		space, w := spaceAt(s, i)
		if space {
			break
		}
		i += w
	}
	return start, i
}

// advanceRunes returns the byte offset k code points after s[i:] (or len(s)).
func advanceRunes(s string, i, k int) int {
	for k > 0 && i < len(s) {
		if k >= 8 && i+8 <= len(s) && ascii8(s, i) {
			i += 8
			k -= 8
			continue
		}
		if s[i] < utf8.RuneSelf {
			i++
		} else {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
		}
		k--
	}
	return i
}

// numCuts is the number of fixed-rule chunks over n units.
func numCuts(n, size, step int) int {
	switch {
	case n <= 0:
		return 0
	case n <= size:
		return 1
	}
	return 1 + (n-size+step-1)/step
}

// appendTrimmed appends the trimmed chunk unless it is empty.
func appendTrimmed(dst []string, chunk string) []string {
	if chunk = strings.TrimSpace(chunk); chunk != "" {
		dst = append(dst, chunk)
	}
	return dst
}
