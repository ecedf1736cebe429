package table

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultDelimiter separates identifier parts when the request names none.
const DefaultDelimiter = "$"

// MaxNamePart is the longest identifier part accepted, in bytes.
const MaxNamePart = 255

// ParseID splits an identifier string. An id equal to the delimiter is the
// root namespace (an empty slice). Every part must pass ValidatePart.
func ParseID(s, delim string) ([]string, error) {
	if delim == "" {
		delim = DefaultDelimiter
	}
	if s == delim {
		return []string{}, nil
	}
	if s == "" {
		return nil, Errorf(CodeInvalidInput, "identifier is empty")
	}
	parts := strings.Split(s, delim)
	for _, p := range parts {
		if err := ValidatePart(p); err != nil {
			return nil, Errorf(CodeInvalidInput, "identifier %q: %v", s, err)
		}
	}
	return parts, nil
}

// ValidatePart checks one identifier part: non-empty valid UTF-8 of at most
// MaxNamePart bytes, no slash, backslash or control character, not starting
// with "." or "_" (reserved for table internals) and not ending in ".lance"
// (the table folder suffix).
func ValidatePart(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty name part")
	case len(p) > MaxNamePart:
		return fmt.Errorf("name part longer than %d bytes", MaxNamePart)
	case !utf8.ValidString(p):
		return fmt.Errorf("name part is not valid UTF-8")
	case p[0] == '.' || p[0] == '_':
		return fmt.Errorf("name part %q may not start with '.' or '_'", p)
	case strings.HasSuffix(p, tableSuffix):
		return fmt.Errorf("name part %q may not end in %q", p, tableSuffix)
	}
	for _, r := range p {
		if r == '/' || r == '\\' || unicode.IsControl(r) {
			return fmt.Errorf("name part %q contains %q", p, r)
		}
	}
	return nil
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
