package iceberg

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// Location is a parsed, cleaned location URI: a scheme ("file" for local
// paths), an authority (an object store's bucket; empty for files) and an
// absolute, cleaned path.
type Location struct {
	Scheme, Host, Path string
}

func (l Location) String() string {
	return l.Scheme + "://" + l.Host + l.Path
}

// ParseLocation parses a location as a notification or a metadata file
// names it: a URI (file:///lake/t, s3://bucket/lake/t) or an absolute
// local path (/lake/t, taken as file://). The path is cleaned, so
// /lake/../etc is /etc. A relative path, a query, a fragment or user
// information is refused.
func ParseLocation(s string) (Location, error) {
	if s == "" {
		return Location{}, fmt.Errorf("empty location")
	}
	if strings.ContainsAny(s, "\x00\\") {
		return Location{}, fmt.Errorf("location %q contains a NUL or backslash", s)
	}
	if strings.HasPrefix(s, "/") {
		return Location{Scheme: "file", Path: path.Clean(s)}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return Location{}, fmt.Errorf("location %q: %v", s, err)
	}
	if u.Scheme == "" || u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return Location{}, fmt.Errorf("location %q: want an absolute path or scheme://authority/path", s)
	}
	p := u.Path
	if p == "" {
		p = "/"
	}
	if !strings.HasPrefix(p, "/") {
		return Location{}, fmt.Errorf("location %q: the path must be absolute", s)
	}
	l := Location{Scheme: strings.ToLower(u.Scheme), Host: u.Host, Path: path.Clean(p)}
	if l.Scheme == "file" && l.Host != "" && l.Host != "localhost" {
		return Location{}, fmt.Errorf("location %q: a file URI names no host", s)
	}
	if l.Scheme == "file" {
		l.Host = ""
	}
	return l, nil
}

// Within reports whether l is prefix p or lies under it (whole path
// segments: /lake is not within /la).
func (l Location) Within(p Location) bool {
	if l.Scheme != p.Scheme || l.Host != p.Host {
		return false
	}
	return p.Path == "/" || l.Path == p.Path || strings.HasPrefix(l.Path, p.Path+"/")
}

// Allowed is where external tables may be read from
// (MVQ_ALLOWED_LOCATIONS): prefixes every namespace may use, and prefixes
// of one namespace (which the namespaces nested in it may use too, as a
// grant on a namespace covers them). The zero value allows nothing.
type Allowed struct {
	all  []Location
	byNS []nsLocation
}

type nsLocation struct {
	ns  []string
	loc Location
}

// ParseAllowed parses a comma separated list of entries, each a location
// prefix (any namespace may read below it) or NAMESPACE=PREFIX (only that
// namespace and those nested in it), e.g.
// "team_a=file:///lake/a,team_b$etl=s3://bucket/b,s3://bucket/shared".
// A nested namespace is written with "$" between its parts. An entry is
// of the namespace form when the text before its first "=" has no "/"
// (a location always has one there: /path or scheme://). Blanks between
// commas are ignored.
func ParseAllowed(list string) (Allowed, error) {
	var out Allowed
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		var ns []string
		if name, loc, ok := strings.Cut(s, "="); ok && !strings.Contains(name, "/") {
			id, err := table.ParseID(strings.TrimSpace(name), table.DefaultDelimiter)
			if err != nil || len(id) == 0 {
				return Allowed{}, fmt.Errorf("entry %q: want NAMESPACE=PREFIX with a namespace name before the =", s)
			}
			ns, s = id, strings.TrimSpace(loc)
		}
		l, err := ParseLocation(s)
		if err != nil {
			return Allowed{}, err
		}
		if ns == nil {
			out.all = append(out.all, l)
		} else {
			out.byNS = append(out.byNS, nsLocation{ns: ns, loc: l})
		}
	}
	return out, nil
}

// Len is the number of entries.
func (a Allowed) Len() int { return len(a.all) + len(a.byNS) }

// String is the list in ParseAllowed's form, global entries first.
func (a Allowed) String() string {
	var parts []string
	for _, l := range a.all {
		parts = append(parts, l.String())
	}
	for _, e := range a.byNS {
		parts = append(parts, table.JoinID(e.ns)+"="+e.loc.String())
	}
	return strings.Join(parts, ",")
}

// For is the prefixes namespace ns may read: the global ones, and those
// of ns and of every namespace above it.
func (a Allowed) For(ns []string) []Location {
	out := slices.Clone(a.all)
	for _, e := range a.byNS {
		if len(e.ns) <= len(ns) && slices.Equal(e.ns, ns[:len(e.ns)]) {
			out = append(out, e.loc)
		}
	}
	return out
}

// Check returns nil when loc is within one of the prefixes namespace ns
// may read, else a CodePermissionDenied error naming field (or a
// CodeInvalidInput one when loc does not parse). A local location (file://)
// must be within them by name and also once its symbolic links are
// resolved: a link inside an allowed folder that points outside it is
// refused as the name it points at would be. (Files are opened through
// openLocal as well, which refuses a link that escapes between this check
// and the open.) No error holds anything read from a file.
func (a Allowed) Check(ns []string, field, loc string) error {
	l, err := ParseLocation(loc)
	if err != nil {
		return errs.Errorf(errs.CodeInvalidInput, "%s: %v", field, err)
	}
	prefixes := a.For(ns)
	within := func(l Location) bool {
		return slices.ContainsFunc(prefixes, func(p Location) bool { return l.Within(p) })
	}
	if !within(l) {
		if len(prefixes) == 0 {
			return errs.Errorf(errs.CodePermissionDenied, "%s %s is not inside an allowed location: MVQ_ALLOWED_LOCATIONS allows none for namespace %s", field, l, table.JoinID(ns))
		}
		return errs.Errorf(errs.CodePermissionDenied, "%s %s is not inside an allowed location of namespace %s (MVQ_ALLOWED_LOCATIONS)", field, l, table.JoinID(ns))
	}
	if l.Scheme != "file" {
		return nil
	}
	real, err := filepath.EvalSymlinks(l.Path)
	if err != nil {
		return nil // nothing there (yet): opening it fails or goes through openLocal
	}
	for _, p := range prefixes {
		if p.Scheme != "file" || !l.Within(p) {
			continue
		}
		root := p.Path
		if r, err := filepath.EvalSymlinks(root); err == nil {
			root = r // the operator's own prefix may be a link
		}
		if (Location{Scheme: "file", Path: real}).Within(Location{Scheme: "file", Path: root}) {
			return nil
		}
	}
	return errs.Errorf(errs.CodePermissionDenied, "%s %s leads through a symbolic link out of the allowed locations of namespace %s (MVQ_ALLOWED_LOCATIONS)", field, l, table.JoinID(ns))
}

// errEscapes is what openLocal says of a name it may not open.
var errEscapes = errors.New("not a regular file inside an allowed location (a symbolic link may not lead out of it)")

// openLocal opens the local file l, already checked to be within one of
// prefixes by name, through an os.Root on each prefix containing it: a
// symbolic link anywhere on the way that leads out of the prefix (or is
// absolute) is refused by the open itself, so a link swapped in after
// Check cannot redirect it. Only regular files are opened.
func openLocal(prefixes []Location, l Location) (*os.File, error) {
	err := error(errEscapes)
	for _, p := range prefixes {
		if p.Scheme != "file" || !l.Within(p) {
			continue
		}
		root, rerr := os.OpenRoot(p.Path)
		if rerr != nil {
			if errors.Is(rerr, fs.ErrNotExist) {
				err = fs.ErrNotExist
			}
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(l.Path, p.Path), "/")
		if rel == "" {
			rel = "."
		}
		f, ferr := root.Open(rel)
		root.Close()
		if ferr != nil {
			if errors.Is(ferr, fs.ErrNotExist) {
				err = fs.ErrNotExist
			}
			continue
		}
		if st, serr := f.Stat(); serr != nil || !st.Mode().IsRegular() {
			f.Close()
			continue
		}
		return f, nil
	}
	return nil, err
}
