package iceberg

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/mvq-dev/mvq/errs"
)

func TestAllowedLocations(t *testing.T) {
	a, err := ParseAllowed(" file:///lake/a , /lake/b,s3://bucket/ice ,")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		loc  string
		code errs.Code // 0: allowed
	}{
		{"/lake/a", 0},
		{"file:///lake/a/t/metadata/v1.metadata.json", 0},
		{"file://localhost/lake/b/x", 0},
		{"/lake/b/../b/x", 0},
		{"s3://bucket/ice/t/data/f.parquet", 0},
		{"/lake/ab", errs.CodePermissionDenied},
		{"/lake/a/../c", errs.CodePermissionDenied},
		{"/lake", errs.CodePermissionDenied},
		{"s3://bucket/icebox/t", errs.CodePermissionDenied},
		{"s3://other/ice/t", errs.CodePermissionDenied},
		{"gs://bucket/ice/t", errs.CodePermissionDenied},
		{"file://host/lake/a", errs.CodeInvalidInput},
		{"lake/a", errs.CodeInvalidInput},
		{"s3://bucket/ice/t?x=1", errs.CodeInvalidInput},
		{"", errs.CodeInvalidInput},
	} {
		err := a.Check([]string{"db"}, "loc", c.loc)
		if c.code == 0 && err != nil || c.code != 0 && errs.CodeOf(err) != c.code {
			t.Errorf("%q: %v, want code %d", c.loc, err, c.code)
		}
	}
	if err := (Allowed{}).Check([]string{"db"}, "loc", "/lake/a"); errs.CodeOf(err) != errs.CodePermissionDenied {
		t.Errorf("no allowed locations: %v", err)
	}
	if _, err := ParseAllowed("relative/path"); err == nil {
		t.Error("a relative prefix was accepted")
	}
}

// TestOpenLocalRefusesLinkSwappedAfterCheck: a file checked while its
// link pointed inside the allowed folder is not opened once the link has
// been swapped to point outside (the open itself refuses the escape).
func TestOpenLocalRefusesLinkSwappedAfterCheck(t *testing.T) {
	lake, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(lake, "data.parquet"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("TOPSECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(lake, "f.parquet")
	if err := os.Symlink("data.parquet", link); err != nil {
		t.Fatal(err)
	}
	a, err := ParseAllowed("db=" + lake)
	if err != nil {
		t.Fatal(err)
	}
	g := guardFS{inner: iceio.LocalFS{}, allowed: a, ns: []string{"db"}}
	raw, err := g.ReadFile(link)
	if err != nil || string(raw) != "inside" {
		t.Fatalf("a link inside: %q %v", raw, err)
	}
	// Swapped between the check and the open.
	if err := a.Check([]string{"db"}, "file", link); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), link); err != nil {
		t.Fatal(err)
	}
	l, _ := ParseLocation(link)
	if f, err := openLocal(a.For([]string{"db"}), l); err == nil {
		f.Close()
		t.Fatal("opened a link that leads outside")
	}
	for _, op := range []func() error{
		func() error { _, err := g.ReadFile(link); return err },
		func() error { _, err := g.Open(link); return err },
	} {
		err := op()
		if errs.CodeOf(err) != errs.CodePermissionDenied || strings.Contains(err.Error(), "TOPSECRET") {
			t.Errorf("swapped link: %v, want permission denied", err)
		}
	}
	// Not a regular file: refused too.
	if _, err := g.Open(lake); err == nil {
		t.Error("opened a folder")
	}
}
