package file

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/mvq-dev/mvq/lance/pb/enc21pb"
)

// TestDumpFile prints the structure of the file named by MVQ_LANCE_DUMP; it
// is a debugging aid and skips without the variable.
func TestDumpFile(t *testing.T) {
	path := os.Getenv("MVQ_LANCE_DUMP")
	if path == "" {
		t.Skip("MVQ_LANCE_DUMP not set")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	r, err := Open(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("version %v rows %d schema %v", r.Version(), r.NumRows(), r.Schema())
	for _, fl := range r.Fields() {
		t.Logf("field %s", prototext.Format(fl))
	}
	for i, c := range r.Container().Columns {
		for j, p := range c.Pages {
			var pl enc21pb.PageLayout
			if err := r.Container().UnpackEncoding(p.Encoding, &pl); err != nil {
				t.Logf("col %d page %d: %v", i, j, err)
				continue
			}
			t.Logf("col %d page %d rows %d bufs %v\n%s", i, j, p.NumRows, p.Buffers, prototext.Format(&pl))
		}
	}
}

// encodingSummary lists, per file column, the distinct page layouts and
// compressions found (for logs and for tests that assert an encoding is
// exercised).
func encodingSummary(t testing.TB, r *Reader) []string {
	t.Helper()
	var out []string
	for i, c := range r.Container().Columns {
		seen := map[string]bool{}
		var kinds []string
		for _, p := range c.Pages {
			var pl enc21pb.PageLayout
			if err := r.Container().UnpackEncoding(p.Encoding, &pl); err != nil {
				t.Fatal(err)
			}
			s := compactLayout(&pl)
			if !seen[s] {
				seen[s] = true
				kinds = append(kinds, s)
			}
		}
		out = append(out, fmt.Sprintf("col %d (%d pages): %s", i, len(c.Pages), strings.Join(kinds, " | ")))
	}
	return out
}

func compactLayout(pl *enc21pb.PageLayout) string {
	s := prototext.MarshalOptions{}.Format(pl)
	s = strings.Join(strings.Fields(s), " ")
	for _, cut := range []string{"symbol_table:"} {
		if i := strings.Index(s, cut); i >= 0 {
			j := strings.Index(s[i:], "\" ")
			if j > 0 {
				s = s[:i] + "symbol_table:<...>" + s[i+j+1:]
			}
		}
	}
	return s
}

func TestDumpSummary(t *testing.T) {
	path := os.Getenv("MVQ_LANCE_SUMMARY")
	if path == "" {
		t.Skip("MVQ_LANCE_SUMMARY not set")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	r, err := Open(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range encodingSummary(t, r) {
		t.Log(l)
	}
}
