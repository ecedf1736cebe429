package httpapi

import (
	"context"
	"slices"
	"strings"

	"github.com/mvq-dev/mvq/table"
)

// A namespace dropped with behavior CASCADE takes its tables and views
// with it. Views outside the namespace that read one of its tables
// (directly, or through other views) would be left reading a table that
// is gone, so the drop follows the table drop's rule: it is a 409 listing
// them, unless the request says "cascade": true (at the top, or "true"
// under context), which drops them too, deepest first.

// viewsOutside returns the views outside namespace ns that read a table
// under it, transitively, deepest first (each after every view that reads
// it).
func (s *Server) viewsOutside(ctx context.Context, ns []string) ([][]string, error) {
	tables, err := s.tablesUnder(ctx, ns)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out [][]string
	for _, t := range tables {
		all, _, err := s.viewsToDrop(ctx, t)
		if err != nil {
			return nil, err
		}
		for _, v := range all {
			k := table.JoinID(v)
			if under(v, ns) || seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, v)
		}
	}
	return out, nil
}

// tablesUnder lists the tables of ns and of its child namespaces, at any
// depth.
func (s *Server) tablesUnder(ctx context.Context, ns []string) ([][]string, error) {
	names, err := s.cat.ListTables(ctx, ns)
	if err != nil {
		return nil, err
	}
	var out [][]string
	for _, n := range names {
		out = append(out, append(slices.Clone(ns), n))
	}
	children, err := s.cat.ListNamespaces(ctx, ns)
	if err != nil {
		return nil, err
	}
	for _, ch := range children {
		sub, err := s.tablesUnder(ctx, append(slices.Clone(ns), ch))
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	return out, nil
}

// under reports whether id lies inside namespace ns.
func under(id, ns []string) bool {
	return len(id) > len(ns) && slices.Equal(id[:len(ns)], ns)
}

// sortedIDs joins ids sorted by name, for messages.
func sortedIDs(ids [][]string) string {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = table.JoinID(id)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
