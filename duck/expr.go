package duck

import (
	"fmt"
)

// CheckExpressionText accepts a SQL expression only if it cannot break out of
// the parentheses the caller wraps it in: quotes closed, parentheses
// balanced and never closing more than they opened, no statement separator
// and no comment outside string literals. What DuckDB then evaluates is one
// expression; its own errors (and external access being off) handle the
// rest.
func CheckExpressionText(s string) error {
	if len(s) > 1<<16 {
		return fmt.Errorf("expression longer than 64 KiB")
	}
	depth := 0
	for i := 0; i < len(s); i++ {
		if EscapeStringAt(s, i) {
			return fmt.Errorf("escape strings (E'…') are not supported at offset %d; use '…' with doubled quotes", i-1)
		}
		switch c := s[i]; c {
		case '\'', '"':
			j := QuoteEnd(s, i)
			if j < 0 {
				return fmt.Errorf("unterminated %c quote at offset %d", c, i)
			}
			i = j
		case '(':
			depth++
		case ')':
			depth--
			if depth < 0 {
				return fmt.Errorf("unbalanced ')' at offset %d", i)
			}
		case ';':
			return fmt.Errorf("';' is not allowed in an expression")
		case '-':
			if i+1 < len(s) && s[i+1] == '-' {
				return fmt.Errorf("comments are not allowed in an expression")
			}
		case '/':
			if i+1 < len(s) && s[i+1] == '*' {
				return fmt.Errorf("comments are not allowed in an expression")
			}
		case '$':
			// $tag$ dollar-quoted strings could hide a parenthesis.
			return fmt.Errorf("'$' is not allowed in an expression (use '…' strings)")
		}
	}
	if depth != 0 {
		return fmt.Errorf("unbalanced '(': %d not closed", depth)
	}
	return nil
}

// QuoteEnd returns the index of the quote that closes the string literal
// or quoted identifier opened by the quote s[i] (' or "), a doubled quote
// being part of the text; -1 when it never closes. Both of mvq's SQL
// checkers (this package's CheckExpressionText and the query lexer in
// refresh) end quotes with it, so they cannot disagree on where one ends.
// Escape strings (E'…') must be refused first: see EscapeStringAt.
func QuoteEnd(s string, i int) int {
	c := s[i]
	for j := i + 1; j < len(s); j++ {
		if s[j] == c {
			if j+1 < len(s) && s[j+1] == c { // doubled quote
				j++
				continue
			}
			return j
		}
	}
	return -1
}

// EscapeStringAt reports whether s[i] opens an escape string (E'…'), in
// which a backslash escapes a quote. The checkers in mvq do not follow
// backslash escapes, so they refuse such strings rather than misread
// where one ends.
func EscapeStringAt(s string, i int) bool {
	if i < 1 || s[i] != '\'' || (s[i-1] != 'E' && s[i-1] != 'e') {
		return false
	}
	if i >= 2 {
		p := s[i-2]
		if p == '_' || p == '$' || p >= 0x80 || (p >= '0' && p <= '9') || (p|0x20 >= 'a' && p|0x20 <= 'z') {
			return false // the E ends an identifier such as name'…'
		}
	}
	return true
}
