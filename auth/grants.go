package auth

import (
	"fmt"
	"slices"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// Action is what a request does to the namespace, table or view it names.
type Action string

// The actions a grant can allow. None implies another: a grant lists each.
const (
	// Read: describe, list, exists, query, count_rows, versions, stats, jobs.
	Read Action = "read"
	// Write: create, insert, update, delete, drop and restore tables and
	// views, create namespaces and versions.
	Write Action = "write"
	// Refresh: refresh a view, cancel its jobs.
	Refresh Action = "refresh"
	// Admin: drop a namespace, and anything at the root.
	Admin Action = "admin"
)

var actions = []Action{Read, Write, Refresh, Admin}

// All is the grant namespace that covers every namespace and the root.
const All = "*"

// Delimiter joins the parts of a grant's namespace ("team_a$sub"), as in
// table identifiers.
const Delimiter = "$"

// Grant allows actions on a namespace and everything under it, or on one
// table. Exactly one of Namespace and Table is set: a namespace grant on N
// covers N, its namespaces and the tables inside them, never a table
// named N in N's parent (a table and a namespace may share a name); a
// table grant covers that table (or view) only.
type Grant struct {
	Namespace string   `json:"namespace,omitempty"`
	Table     string   `json:"table,omitempty"`
	Actions   []Action `json:"actions"`

	parts []string // Namespace or Table split and NFC-normalized; nil for All
}

// Identity is an authenticated caller: its principal, its grants and the
// request rate it may use.
type Identity struct {
	Principal string
	Grants    []Grant
	// RateLimit is requests per second for the principal; 0 is unlimited.
	RateLimit float64
}

// AllowsNamespace reports whether the identity may do action on namespace
// ns (its parts; empty is the root): a namespace grant on ns or one of
// its ancestors, or "*" (the only grant that covers the root). Names
// compare after NFC normalization.
func (id *Identity) AllowsNamespace(action Action, ns []string) bool {
	for i := range id.Grants {
		if id.Grants[i].covers(action, ns, false) {
			return true
		}
	}
	return false
}

// AllowsTable reports whether the identity may do action on table (or
// view) t, its parts: a grant on t itself, a namespace grant on the
// namespace t is in or one of its ancestors, or "*". A table at the root
// needs "*". Names compare after NFC normalization.
func (id *Identity) AllowsTable(action Action, t []string) bool {
	if len(t) == 0 {
		return false
	}
	for i := range id.Grants {
		if id.Grants[i].covers(action, t, true) {
			return true
		}
	}
	return false
}

func (g *Grant) covers(action Action, target []string, isTable bool) bool {
	if !slices.Contains(g.Actions, action) {
		return false
	}
	if g.Namespace == All {
		return true
	}
	if len(g.parts) == 0 {
		return false
	}
	switch {
	case g.Table != "":
		// One table: exactly it, never a namespace of the same name.
		if !isTable || len(target) != len(g.parts) {
			return false
		}
	case isTable:
		// Inside the namespace: the table's own namespace is g's or
		// below it (a table named like g, in g's parent, is not).
		if len(target) <= len(g.parts) {
			return false
		}
	default:
		if len(target) < len(g.parts) {
			return false
		}
	}
	for i, p := range g.parts {
		if norm.NFC.String(target[i]) != p {
			return false
		}
	}
	return true
}

// checkGrants validates grants (each names a namespace and at least one
// known action) and prepares them for matching. where names the grants'
// source in errors.
func checkGrants(grants []Grant, where string) error {
	for i := range grants {
		g := &grants[i]
		at := fmt.Sprintf("%s[%d]", where, i)
		switch {
		case g.Namespace != "" && g.Table != "":
			return fmt.Errorf("%s: namespace and table both set; a grant is on a namespace or on one table", at)
		case g.Table == All:
			return fmt.Errorf("%s.table: %q is not a table; use namespace: %q", at, All, All)
		case g.Table != "":
			g.parts = strings.Split(norm.NFC.String(g.Table), Delimiter)
			if slices.Contains(g.parts, "") {
				return fmt.Errorf("%s.table: %q has an empty part", at, g.Table)
			}
		case g.Namespace == "":
			return fmt.Errorf("%s.namespace: required (a namespace such as team_a, or %q for all; or table: a single table such as team_a$docs)", at, All)
		case g.Namespace != All:
			g.parts = strings.Split(norm.NFC.String(g.Namespace), Delimiter)
			if slices.Contains(g.parts, "") {
				return fmt.Errorf("%s.namespace: %q has an empty part", at, g.Namespace)
			}
		}
		if len(g.Actions) == 0 {
			return fmt.Errorf("%s.actions: required (some of read, write, refresh, admin)", at)
		}
		for _, a := range g.Actions {
			if !slices.Contains(actions, a) {
				return fmt.Errorf("%s.actions: unknown action %q (want read, write, refresh or admin)", at, a)
			}
		}
	}
	return nil
}
