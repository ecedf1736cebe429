package duck

import "strings"

// ColumnRefs returns the names the statement's column references use, in
// lower case (every part of a qualified reference, so t.a gives t and a),
// and whether it selects a star (*, COLUMNS(...)), which may read every
// column of its input. Aliases a query defines are not references; a
// reference to one (DuckDB allows them in WHERE) is, harmlessly, a name.
func (s *Statement) ColumnRefs() (names map[string]bool, star bool) {
	names = map[string]bool{}
	Walk(s.Node, func(obj map[string]any) {
		switch obj["class"] {
		case "COLUMN_REF":
			parts, _ := obj["column_names"].([]any)
			for _, p := range parts {
				if n, ok := p.(string); ok {
					names[strings.ToLower(n)] = true
				}
			}
		case "STAR":
			star = true
		}
	})
	return names, star
}
