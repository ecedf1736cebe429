// Package corpus makes the deterministic English-like documents the
// benchmarks refresh: the same index always gives the same text.
package corpus

import "strings"

var words = strings.Fields(`the of and to in is was for on that with as by at from his her it an were are which this be
or has had first one their its new after who they have two been also not but other time during
city year years school world state national including part until most later where team would made
between river known over north south west east house under several season game series company
album film music university county village district station water power line road church people`)

// Doc is document i: sentences of 6 to 17 words in paragraphs of a few
// sentences, about size bytes long.
func Doc(i, size int) string {
	x := uint64(i)*0x9E3779B97F4A7C15 + 1
	next := func(n int) int {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return int(x % uint64(n))
	}
	var sb strings.Builder
	sb.Grow(size + 128)
	for sb.Len() < size {
		n := 6 + next(12)
		for w := 0; w < n; w++ {
			word := words[next(len(words))]
			if w == 0 {
				word = strings.ToUpper(word[:1]) + word[1:]
			} else {
				sb.WriteByte(' ')
			}
			sb.WriteString(word)
		}
		sb.WriteByte('.')
		if next(5) == 0 {
			sb.WriteString("\n\n")
		} else {
			sb.WriteByte(' ')
		}
	}
	return sb.String()
}
