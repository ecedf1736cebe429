package iceberg

import (
	"fmt"
	"net/url"
	"path"
	"strings"

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

// Allowed is the list of location prefixes external tables may be read
// from (MVQ_ALLOWED_LOCATIONS). The zero value allows nothing.
type Allowed []Location

// ParseAllowed parses a comma separated list of location prefixes;
// blanks between commas are ignored.
func ParseAllowed(list string) (Allowed, error) {
	var out Allowed
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		l, err := ParseLocation(s)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// Check returns nil when loc is within one of the prefixes, else a
// CodePermissionDenied error naming field (or a CodeInvalidInput one when
// loc does not parse).
func (a Allowed) Check(field, loc string) error {
	l, err := ParseLocation(loc)
	if err != nil {
		return table.Errorf(table.CodeInvalidInput, "%s: %v", field, err)
	}
	for _, p := range a {
		if l.Within(p) {
			return nil
		}
	}
	if len(a) == 0 {
		return table.Errorf(table.CodePermissionDenied, "%s %s is not inside an allowed location: MVQ_ALLOWED_LOCATIONS allows none", field, l)
	}
	return table.Errorf(table.CodePermissionDenied, "%s %s is not inside an allowed location (MVQ_ALLOWED_LOCATIONS)", field, l)
}
