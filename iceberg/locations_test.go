package iceberg

import (
	"testing"

	"github.com/mvq-dev/mvq/table"
)

func TestAllowedLocations(t *testing.T) {
	a, err := ParseAllowed(" file:///lake/a , /lake/b,s3://bucket/ice ,")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		loc  string
		code table.Code // 0: allowed
	}{
		{"/lake/a", 0},
		{"file:///lake/a/t/metadata/v1.metadata.json", 0},
		{"file://localhost/lake/b/x", 0},
		{"/lake/b/../b/x", 0},
		{"s3://bucket/ice/t/data/f.parquet", 0},
		{"/lake/ab", table.CodePermissionDenied},
		{"/lake/a/../c", table.CodePermissionDenied},
		{"/lake", table.CodePermissionDenied},
		{"s3://bucket/icebox/t", table.CodePermissionDenied},
		{"s3://other/ice/t", table.CodePermissionDenied},
		{"gs://bucket/ice/t", table.CodePermissionDenied},
		{"file://host/lake/a", table.CodeInvalidInput},
		{"lake/a", table.CodeInvalidInput},
		{"s3://bucket/ice/t?x=1", table.CodeInvalidInput},
		{"", table.CodeInvalidInput},
	} {
		err := a.Check("loc", c.loc)
		if c.code == 0 && err != nil || c.code != 0 && table.ErrorCode(err) != c.code {
			t.Errorf("%q: %v, want code %d", c.loc, err, c.code)
		}
	}
	if err := Allowed(nil).Check("loc", "/lake/a"); table.ErrorCode(err) != table.CodePermissionDenied {
		t.Errorf("no allowed locations: %v", err)
	}
	if _, err := ParseAllowed("relative/path"); err == nil {
		t.Error("a relative prefix was accepted")
	}
}
