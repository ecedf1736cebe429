package iceberg_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/iceberg"
	"github.com/mvq-dev/mvq/internal/icebergtest"
	"github.com/mvq-dev/mvq/table"
)

// secretText is what a file outside every allowed location holds; no
// error may show any of it.
const secretText = "root:x:0:0:TOPSECRET-mvq-0451:/root:/bin/bash\n"

func notifyLoc(t *testing.T, reg *iceberg.Registrar, ns, name, uuid, loc string, ts int64) error {
	t.Helper()
	var req iceberg.Request
	if err := json.Unmarshal(icebergtest.NotificationFor("CREATE", name, ts, uuid, loc), &req); err != nil {
		t.Fatal(err)
	}
	return reg.Notify(context.Background(), []string{ns, name}, req)
}

// noEcho fails when err shows anything of a file's contents: the secret,
// or a parser's quote of its first bytes.
func noEcho(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	if strings.Contains(msg, "TOPSECRET") || strings.Contains(msg, "root:") || strings.Contains(msg, "'r'") || strings.Contains(msg, "invalid character") {
		t.Errorf("%s: the error shows the file's contents: %s", what, msg)
	}
}

// TestSymlinkOutOfAllowedLocation: a symbolic link inside the allowed
// folder that leads out of it (to a file such as /etc/passwd, or to the
// folder of another tenant's Iceberg table) is refused as 403
// (CodePermissionDenied) without showing the file's contents, and
// nothing is registered; an unreadable file inside the folder is a 400
// that does not quote it either; a relative link that stays inside still
// works.
func TestSymlinkOutOfAllowedLocation(t *testing.T) {
	t.Parallel()
	wh, lakeDir, outside := t.TempDir(), t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "passwd")
	if err := os.WriteFile(secret, []byte(secretText), 0o644); err != nil {
		t.Fatal(err)
	}
	// Another tenant's table, outside the allowed folder.
	theirs := icebergtest.NewLake(t, filepath.Join(outside, "lake"), "docs", true)
	theirs.Append(icebergtest.Row{ID: 1, Text: "tenant B's row"})
	for link, target := range map[string]string{
		"evil.metadata.json": secret,
		"link":               outside,
		"rel":                "../" + filepath.Base(outside), // relative, still out
	} {
		if err := os.Symlink(target, filepath.Join(lakeDir, link)); err != nil {
			t.Fatal(err)
		}
	}
	var commits atomic.Int64
	reg, cat := registrar(t, wh, lakeDir, &commits)
	theirMeta := strings.TrimPrefix(theirs.MetadataLocation(), outside)
	for name, loc := range map[string]string{
		"file link to a secret":          filepath.Join(lakeDir, "evil.metadata.json"),
		"file link, as a URI":            "file://" + filepath.Join(lakeDir, "evil.metadata.json"),
		"folder link to a secret":        filepath.Join(lakeDir, "link", "passwd"),
		"folder link to another table":   filepath.Join(lakeDir, "link") + theirMeta,
		"relative link to another table": filepath.Join(lakeDir, "rel") + theirMeta,
	} {
		err := notifyLoc(t, reg, "db", "docs", theirs.UUID(), loc, 1000)
		if errs.CodeOf(err) != errs.CodePermissionDenied {
			t.Errorf("%s: %v, want permission denied", name, err)
		}
		noEcho(t, name, err)
	}
	if _, err := cat.OpenTable(context.Background(), []string{"db", "docs"}); errs.CodeOf(err) != errs.CodeTableNotFound {
		t.Fatalf("a refused notification registered the table: %v", err)
	}
	if commits.Load() != 0 {
		t.Fatalf("%d commits", commits.Load())
	}

	// A file inside that is no Iceberg metadata: 400, not quoted.
	junk := filepath.Join(lakeDir, "junk.metadata.json")
	if err := os.WriteFile(junk, []byte(secretText), 0o644); err != nil {
		t.Fatal(err)
	}
	err := notifyLoc(t, reg, "db", "docs", theirs.UUID(), junk, 1000)
	if errs.CodeOf(err) != errs.CodeInvalidInput {
		t.Errorf("junk metadata: %v, want invalid input", err)
	}
	noEcho(t, "junk metadata", err)

	// A relative link that stays inside the allowed folder is followed.
	ours := icebergtest.NewLake(t, filepath.Join(lakeDir, "real"), "docs", true)
	ours.Append(icebergtest.Row{ID: 7, Text: "ours"})
	if err := os.Symlink("real", filepath.Join(lakeDir, "current")); err != nil {
		t.Fatal(err)
	}
	inside := filepath.Join(lakeDir, "current") + strings.TrimPrefix(ours.MetadataLocation(), filepath.Join(lakeDir, "real"))
	if err := notifyLoc(t, reg, "db", "docs", ours.UUID(), inside, 2000); err != nil {
		t.Fatalf("a link inside the allowed folder: %v", err)
	}
}

// TestAllowedPerNamespace: MVQ_ALLOWED_LOCATIONS entries of the form
// NAMESPACE=PREFIX let only that namespace (and those nested in it) read
// below the prefix: namespace db cannot register the table in the folder
// allowed to namespace other, which can; an entry without a namespace is
// open to all.
func TestAllowedPerNamespace(t *testing.T) {
	t.Parallel()
	lakeA, lakeB := t.TempDir(), t.TempDir()
	a, err := iceberg.ParseAllowed("db=file://" + lakeA + ", other=" + lakeB + ",s3://bucket/shared, team$etl=s3://bucket/etl=1/x")
	if err != nil {
		t.Fatal(err)
	}
	if a.Len() != 4 {
		t.Fatalf("%d entries: %s", a.Len(), a)
	}
	for _, c := range []struct {
		ns   string
		loc  string
		deny bool
	}{
		{"db", lakeA + "/t/metadata/v1.metadata.json", false},
		{"db$sub", lakeA + "/t", false},
		{"db", lakeB + "/t", true},
		{"dbx", lakeA + "/t", true},
		{"other", lakeB + "/t", false},
		{"other", lakeA + "/t", true},
		{"db", "s3://bucket/shared/t", false},
		{"anyone", "s3://bucket/shared/t", false},
		{"team$etl", "s3://bucket/etl=1/x/t", false},
		{"team", "s3://bucket/etl=1/x/t", true},
	} {
		ns, _ := table.ParseID(c.ns, "$")
		err := a.Check(ns, "loc", c.loc)
		if c.deny != (errs.CodeOf(err) == errs.CodePermissionDenied) || !c.deny && err != nil {
			t.Errorf("%s reading %s: %v (deny %v)", c.ns, c.loc, err, c.deny)
		}
	}
	for _, bad := range []string{"=file:///x", "db=relative/x", "a$$b=file:///x", "db="} {
		if _, err := iceberg.ParseAllowed(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}

	// Through the registrar: namespace db is refused the table in lakeB,
	// namespace other registers it.
	wh := t.TempDir()
	var commits atomic.Int64
	_, cat := registrar(t, wh, lakeA, &commits)
	if err := cat.CreateNamespace(context.Background(), []string{"other"}, "", nil); err != nil {
		t.Fatal(err)
	}
	reg := iceberg.NewRegistrar(cat, a)
	lake := icebergtest.NewLake(t, lakeB, "docs", true)
	lake.Append(icebergtest.Row{ID: 1, Text: "other's row"})
	if err := notifyLoc(t, reg, "db", "docs", lake.UUID(), lake.MetadataLocation(), 1000); errs.CodeOf(err) != errs.CodePermissionDenied {
		t.Fatalf("db registering other's table: %v, want permission denied", err)
	}
	if err := notifyLoc(t, reg, "other", "docs", lake.UUID(), lake.MetadataLocation(), 1000); err != nil {
		t.Fatalf("other registering its own table: %v", err)
	}
}
