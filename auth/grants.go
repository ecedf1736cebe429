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

// Grant allows actions on a namespace and everything under it.
type Grant struct {
	Namespace string   `json:"namespace"`
	Actions   []Action `json:"actions"`

	parts []string // Namespace split and NFC-normalized; nil for All
}

// Identity is an authenticated caller: its principal, its grants and the
// request rate it may use.
type Identity struct {
	Principal string
	Grants    []Grant
	// RateLimit is requests per second for the principal; 0 is unlimited.
	RateLimit float64
}

// Allows reports whether the identity may do action on target (the parts
// of a namespace, table or view identifier; empty is the root). A grant on
// namespace N covers N and every identifier under it; "*" covers all,
// the root included. Names compare after NFC normalization.
func (id *Identity) Allows(action Action, target []string) bool {
	for i := range id.Grants {
		if id.Grants[i].covers(action, target) {
			return true
		}
	}
	return false
}

func (g *Grant) covers(action Action, target []string) bool {
	if !slices.Contains(g.Actions, action) {
		return false
	}
	if g.Namespace == All {
		return true
	}
	if len(g.parts) == 0 || len(target) < len(g.parts) {
		return false
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
		case g.Namespace == "":
			return fmt.Errorf("%s.namespace: required (a namespace such as team_a, or %q for all)", at, All)
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
