package table

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/mvq-dev/mvq/errs"
)

// DefaultDelimiter separates identifier parts when the request names none.
const DefaultDelimiter = "$"

// MaxNamePart is the longest identifier part accepted, in bytes: a file
// name may have 255 bytes, and a table's folder adds ".lance".
const MaxNamePart = 255 - len(tableSuffix)

// MaxIDBytes is the longest identifier accepted, its parts joined by one
// byte each: an object store key (1024 bytes on S3) must still have room
// for the warehouse prefix and the table's own paths.
const MaxIDBytes = 768

// ParseID splits an identifier string and normalizes each part to Unicode
// NFC, so two spellings of one name (composed é and e + U+0301) are one
// identifier: the normalized parts are what is stored and looked up. An id
// equal to the delimiter is the root namespace (an empty slice). Every part
// must pass ValidatePart, and the whole id must be at most MaxIDBytes.
func ParseID(s, delim string) ([]string, error) {
	if delim == "" {
		delim = DefaultDelimiter
	}
	if s == delim {
		return []string{}, nil
	}
	if s == "" {
		return nil, errs.Errorf(errs.CodeInvalidInput, "identifier is empty")
	}
	parts := strings.Split(s, delim)
	n := len(parts) - 1
	for i, p := range parts {
		if utf8.ValidString(p) {
			p = norm.NFC.String(p)
			parts[i] = p
		}
		if err := ValidatePart(p); err != nil {
			return nil, errs.Errorf(errs.CodeInvalidInput, "identifier %q: %v", truncateName(s), err)
		}
		n += len(p)
	}
	if n > MaxIDBytes {
		return nil, errs.Errorf(errs.CodeInvalidInput, "identifier %q: longer than %d bytes", truncateName(s), MaxIDBytes)
	}
	return parts, nil
}

// ValidatePart checks one identifier part: non-empty valid UTF-8 in NFC of
// at most MaxNamePart bytes; no slash, backslash, control character,
// Unicode format character (such as U+202E, which reorders what a reader
// sees), line/paragraph separator or space other than U+0020 (a no-break
// or ideographic space looks like one); no whitespace at either end and no
// combining mark first (names that look like another name, or like none);
// not starting with "." or "_" (reserved for table internals) and not
// ending in ".lance" (the table folder suffix).
func ValidatePart(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty name part")
	case len(p) > MaxNamePart:
		return fmt.Errorf("name part longer than %d bytes", MaxNamePart)
	case !utf8.ValidString(p):
		return fmt.Errorf("name part is not valid UTF-8")
	case !norm.NFC.IsNormalString(p):
		return fmt.Errorf("name part %q is not in Unicode NFC", p)
	case p[0] == '.' || p[0] == '_':
		return fmt.Errorf("name part %q may not start with '.' or '_'", p)
	case strings.HasSuffix(p, tableSuffix):
		return fmt.Errorf("name part %q may not end in %q", p, tableSuffix)
	}
	first, _ := utf8.DecodeRuneInString(p)
	last, _ := utf8.DecodeLastRuneInString(p)
	switch {
	case unicode.IsSpace(first) || unicode.IsSpace(last):
		return fmt.Errorf("name part %q starts or ends with whitespace", p)
	case unicode.Is(unicode.M, first):
		return fmt.Errorf("name part %q starts with a combining mark (%U)", p, first)
	}
	for _, r := range p {
		if r == '/' || r == '\\' || unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) || unicode.Is(unicode.Zs, r) && r != ' ' {
			return fmt.Errorf("name part %q contains %U", p, r)
		}
	}
	return nil
}

// truncateName shortens a name for an error message.
func truncateName(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// JoinID renders an identifier with the default delimiter.
func JoinID(id []string) string {
	if len(id) == 0 {
		return DefaultDelimiter
	}
	return strings.Join(id, DefaultDelimiter)
}

const tableSuffix = ".lance"

func namespaceKey(ns []string) string {
	if len(ns) == 0 {
		return ""
	}
	return strings.Join(ns, "/") + "/"
}

// tableKey is the folder of a table: namespace folders, then name.lance/.
func tableKey(id []string) string {
	return namespaceKey(id[:len(id)-1]) + id[len(id)-1] + tableSuffix + "/"
}
