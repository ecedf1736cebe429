package refresh

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/table"
)

func TestParseProjection(t *testing.T) {
	for q, want := range map[string][]string{
		`SELECT id, body FROM "docs$articles"`:              {"id", "body"},
		`select ID,"Body" as b from docs$articles a`:        {"ID", "Body"},
		`SELECT "lang" AS "L" FROM "docs$articles" AS x`:    {"lang"},
		`SELECT id, body FROM "docs$articles" WHERE true`:   nil,
		`SELECT lower(title) FROM "docs$articles"`:          nil,
		`SELECT * FROM "docs$articles"`:                     nil,
		`SELECT a.id FROM "docs$articles" a`:                nil,
		`SELECT id + 1 AS id FROM "docs$articles"`:          nil,
		`SELECT true, id FROM "docs$articles"`:              nil,
		`SELECT current_user FROM "docs$articles"`:          nil,
		`SELECT 'id' FROM "docs$articles"`:                  nil,
		`SELECT id x FROM "docs$articles"`:                  nil,
		`SELECT DISTINCT id FROM "docs$articles"`:           nil,
		`SELECT id FROM "docs$articles" a b`:                nil,
		`SELECT COLUMNS('id') FROM "docs$articles"`:         nil,
		`SELECT id, FROM "docs$articles"`:                   nil,
		`SELECT id FROM "docs$articles" /* c */ -- c`:       {"id"},
		`SELECT id FROM "docs$articles" ORDER BY id`:        nil,
		`SELECT id, body FROM "docs$articles" LIMIT 1`:      nil,
		`SELECT "" FROM "docs$articles"`:                    nil,
		`SELECT id FROM "docs$articles" WHERE id = 1`:       nil,
		`SELECT id FROM "docs$articles" AS`:                 nil,
		`SELECT id AS FROM "docs$articles"`:                 nil,
		`SELECT id, body AS "c", lang FROM "docs$articles"`: {"id", "body", "lang"},
	} {
		p := parseProjection(q)
		var got []string
		if p != nil {
			got = p.names
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", q, got, want)
		}
	}
}

// TestPassThroughSameRows: views whose query only picks (and renames)
// columns write exactly the rows DuckDB's path writes (the same query
// with a WHERE that keeps every row), NULLs and empty strings included,
// and skip DuckDB; a value that is not valid UTF-8 sends the item to
// DuckDB.
func TestPassThroughSameRows(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0, frag1)
	for i, q := range []string{
		`SELECT id, body FROM "docs$articles"`,
		`select BODY as text, "Id", lang from docs$articles a`,
		`SELECT title AS t, title AS u FROM "docs$articles"`,
	} {
		for _, kind := range []string{"query", "chunker"} {
			if kind == "chunker" && i != 0 {
				continue
			}
			req := func(sql string) CreateRequest {
				r := CreateRequest{Kind: kind, SourceQuery: sql}
				if kind == "chunker" {
					r.UDTFSpec = chunkerEntry(fixed4)
				}
				return r
			}
			fast := b.create(t, fmt.Sprintf("fast%d_%s", i, kind), req(q))
			slow := b.create(t, fmt.Sprintf("slow%d_%s", i, kind), req(q+" WHERE id IS NOT NULL OR id IS NULL"))
			before := b.e.passes.passed.Load()
			b.refresh(t, fast, fmt.Sprintf("j-fast-%d-%s", i, kind), Options{})
			if b.e.passes.passed.Load() == before {
				t.Errorf("%s view %q ran in DuckDB", kind, q)
			}
			before = b.e.passes.passed.Load()
			b.refresh(t, slow, fmt.Sprintf("j-slow-%d-%s", i, kind), Options{})
			if b.e.passes.passed.Load() != before {
				t.Errorf("%s view %q WHERE ... skipped DuckDB", kind, q)
			}
			got, want := b.rows(t, fast), b.rows(t, slow)
			if len(want) == 0 {
				t.Fatalf("%s view %q: no rows", kind, q)
			}
			eqRows(t, kind+" "+q, got, want)
			vf, err := b.e.View(b.ctx, fast)
			if err != nil {
				t.Fatal(err)
			}
			vs, err := b.e.View(b.ctx, slow)
			if err != nil {
				t.Fatal(err)
			}
			if !vf.Schema.Equal(vs.Schema) {
				t.Errorf("%s view %q: schema %s, DuckDB's %s", kind, q, vf.Schema, vs.Schema)
			}
		}
	}
}

// TestPassThroughInvalidUTF8: an item with a string that is not valid
// UTF-8 runs in DuckDB, whatever DuckDB makes of it.
func TestPassThroughInvalidUTF8(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, []article{{1, "a", "en", "ok"}, {2, "b\xff", "en", "x"}})
	id := b.create(t, "bad", CreateRequest{Kind: "query", SourceQuery: `SELECT id, title FROM "docs$articles"`})
	before := b.e.passes.passed.Load()
	p := b.plan(t, id, "j1", Options{})
	for i := range p.Items {
		_, _ = b.e.Expand(b.ctx, p, i)
	}
	if b.e.passes.passed.Load() != before {
		t.Fatal("an item with invalid UTF-8 skipped DuckDB")
	}
}

// TestValidUTF8: the ASCII fast paths and the per-value check agree on
// values with NUL bytes and non-ASCII bytes at every place of a 32-byte
// block and an 8-byte word, and in the tail.
func TestValidUTF8(t *testing.T) {
	cases := []struct {
		vals []string
		want bool
	}{
		{[]string{"plain ascii text", "", "x"}, true},
		{[]string{"sixteen bytes!!!", "héllo wörld"}, true},
		{[]string{"abcdefghijk\x00mnop"}, false},
		{[]string{"abcdefghijklmno", "pq\x00"}, false},
		{[]string{"abcdefghijklmnop\xff"}, false},
		{[]string{"abcdefg\xc3", "\xa9tail"}, false}, // valid only across the boundary
		{[]string{"h\xc3\xa9", "\xc3\xa9", "w\xc3\xb6rld"}, true},
		{[]string{"caf\xc3\xa9\x00"}, false},
		{[]string{strings.Repeat("a", 40) + "\x00" + strings.Repeat("b", 40)}, false},
		{[]string{strings.Repeat("a", 40) + "\x80" + strings.Repeat("b", 40)}, false},
		{[]string{strings.Repeat("a", 40) + "\x01\x7f" + strings.Repeat("b", 40)}, true},
		{[]string{strings.Repeat("abc", 30), "d\xc3\xa9" + strings.Repeat("e", 40)}, true},
	}
	for _, c := range cases {
		// Every place of a 32-byte block and of an 8-byte word.
		for shift := 0; shift < 32; shift++ {
			vals := append([]string{strings.Repeat("a", shift)}, c.vals...)
			b := array.NewStringBuilder(memory.DefaultAllocator)
			b.AppendValues(vals, nil)
			arr := b.NewStringArray()
			if got := validUTF8(arr); got != c.want {
				t.Errorf("%q (after %d bytes): validUTF8 %v, want %v", c.vals, shift, got, c.want)
			}
			arr.Release()
			b.Release()
		}
	}
}
