package warehouse

import (
	"context"
	"testing"
)

// TestLocationHasNoQuery: an s3:// warehouse's endpoint, region and
// addressing parameters are how mvq reaches the store; a location it
// answers names the object only (a Lance client given the URI with the
// query would read the query as part of the path).
func TestLocationHasNoQuery(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	w, err := Open(context.Background(), "s3://bucket/pre/fix/?endpoint=http%3A%2F%2F127.0.0.1%3A1&region=us-east-1&use_path_style=true")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got := w.Location("docs/t.lance"); got != "s3://bucket/pre/fix/docs/t.lance" {
		t.Fatalf("Location: %q", got)
	}
	dir := t.TempDir()
	l, err := Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.Location("a/b"); got != "file://"+dir+"/a/b" {
		t.Fatalf("local Location: %q", got)
	}
}
