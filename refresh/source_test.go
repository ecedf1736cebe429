package refresh

import (
	"fmt"
	"testing"

	"github.com/mvq-dev/mvq/errs"
)

// TestSourceTable: the source is the first FROM of a SELECT; it is the only
// table the view's SQL can read (the engine registers no other), so it is
// the one whose read grant a view create needs.
func TestSourceTable(t *testing.T) {
	for q, want := range map[string]string{
		`SELECT id, body FROM "docs$articles" WHERE lang = 'en'`: "[docs articles]",
		`SELECT extract(year FROM d) AS y FROM "a$b$c"`:          "[a b c]",
		`SELECT * FROM t JOIN "other$secret" USING (id)`:         "[t]",
		`SELECT (SELECT 1 FROM "x$y") AS one FROM "a$b"`:         "[x y]",
		"SELECT 1": "error",
		`SELECT * FROM read_parquet('/etc/passwd')`: "error",
		`SELECT * FROM "a"."b"`:                     "error",
	} {
		got, err := SourceTable(q)
		if want == "error" {
			if errs.CodeOf(err) != errs.CodeInvalidInput {
				t.Errorf("%s: %v %v, want an invalid-input error", q, got, err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("%s: %v %v, want %s", q, got, err, want)
		}
	}
}
