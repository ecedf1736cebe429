package refresh

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// wantErr checks err is a *errs.Error with code whose message starts with
// prefix.
func wantErr(t *testing.T, err error, code errs.Code, prefix string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want code %d %q", code, prefix)
	}
	te, ok := err.(*errs.Error)
	if !ok {
		t.Fatalf("error %T %v is not a *errs.Error", err, err)
	}
	if te.Code != code || !strings.HasPrefix(te.Error(), prefix) {
		t.Fatalf("error code %d %q, want code %d starting %q", te.Code, te.Error(), code, prefix)
	}
}

func encodeSchema(t *testing.T, fields ...arrow.Field) string {
	t.Helper()
	s, err := table.EncodeSchema(arrow.NewSchema(fields, nil))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCreateViewValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0)
	if _, _, err := b.cat.CreateTable(b.ctx, []string{"docs", "taken"}, articleSchema, articles(t), "", nil); err != nil {
		t.Fatal(err)
	}
	badSha := chunkerEntry(fixed4)
	badSha.UDTFSha = strings.Repeat("0", 64)
	overlap := chunkerEntry(`{"chunker":"fixed","input_column":"body","output_column":"chunk","chunk_size":4,"chunk_overlap":4}`)
	notJSON := chunkerEntry(`{"chunker":`)
	wrongKind := chunkerEntry(fixed4)
	wrongKind.Kind = "udtf"
	manifest := `{"pip": ["x"]`
	badManifest := chunkerEntry(fixed4)
	badManifest.Manifest = &manifest
	u64 := arrow.Field{Name: "__source_row_id", Type: arrow.PrimitiveTypes.Uint64}
	i64 := arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64}

	for _, tc := range []struct {
		name string
		id   []string
		req  CreateRequest
		code errs.Code
		msg  string
	}{
		{"unknown kind", nil, CreateRequest{Kind: "table", SourceQuery: queryView}, errs.CodeInvalidInput, "kind: unknown kind"},
		{"no query", nil, CreateRequest{Kind: "query"}, errs.CodeInvalidInput, "source_query: required"},
		{"bad sha", nil, CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`, UDTFSpec: badSha}, errs.CodeInvalidInput, "udtf_spec.udtf_sha: "},
		{"overlap >= size", nil, CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`, UDTFSpec: overlap}, errs.CodeInvalidInput, "udtf_spec.udtf: chunk_overlap: must be >= 0 and < chunk_size"},
		{"spec not JSON", nil, CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`, UDTFSpec: notJSON}, errs.CodeInvalidInput, "udtf_spec.udtf: invalid JSON"},
		{"udtf not base64", nil, CreateRequest{Kind: "chunker", SourceQuery: `SELECT body FROM "docs$articles"`, UDTFSpec: &UDTFEntry{Kind: "chunker", UDTF: "%%%", UDTFSha: "x"}}, errs.CodeInvalidInput, "udtf_spec.udtf: not base64"},
		{"spec kind differs", nil, CreateRequest{Kind: "chunker", SourceQuery: `SELECT body FROM "docs$articles"`, UDTFSpec: wrongKind}, errs.CodeInvalidInput, "udtf_spec.kind: "},
		{"chunker without spec", nil, CreateRequest{Kind: "chunker", SourceQuery: `SELECT body FROM "docs$articles"`}, errs.CodeInvalidInput, "udtf_spec: required"},
		{"query with spec", nil, CreateRequest{Kind: "query", SourceQuery: queryView, UDTFSpec: chunkerEntry(fixed4)}, errs.CodeInvalidInput, "udtf_spec: must be null"},
		{"bad spec manifest", nil, CreateRequest{Kind: "chunker", SourceQuery: `SELECT body FROM "docs$articles"`, UDTFSpec: badManifest}, errs.CodeInvalidInput, "udtf_spec.manifest: "},
		{"input column not selected", nil, CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, title FROM "docs$articles"`, UDTFSpec: chunkerEntry(fixed4)}, errs.CodeInvalidInput, `source_query: must select the chunker's input_column "body"`},
		{"input column not text", nil, CreateRequest{Kind: "chunker", SourceQuery: `SELECT id AS body FROM "docs$articles"`, UDTFSpec: chunkerEntry(fixed4)}, errs.CodeInvalidInput, `source_query: the chunker's input_column "body" must be text`},
		{"output column clashes", nil, CreateRequest{Kind: "chunker", SourceQuery: `SELECT title AS chunk, body FROM "docs$articles"`, UDTFSpec: chunkerEntry(fixed4)}, errs.CodeInvalidInput, `udtf_spec.udtf: output_column "chunk" clashes`},
		{"aggregate", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT count(*) AS n FROM "docs$articles"`}, errs.CodeInvalidInput, "source_query: aggregates are not allowed"},
		{"group by", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT lang FROM "docs$articles" GROUP BY lang`}, errs.CodeInvalidInput, "source_query: GROUP BY not allowed"},
		{"distinct", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT DISTINCT lang FROM "docs$articles"`}, errs.CodeInvalidInput, "source_query: DISTINCT not allowed"},
		{"join", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT a.id FROM "docs$articles" a JOIN "docs$articles" b ON a.id = b.id`}, errs.CodeInvalidInput, "source_query: joins not allowed"},
		{"comma join", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT 1 AS x FROM "docs$articles", "docs$other"`}, errs.CodeInvalidInput, `source_query: unexpected ","`},
		{"limit", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT id FROM "docs$articles" LIMIT 3`}, errs.CodeInvalidInput, "source_query: LIMIT not allowed"},
		{"order by", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT id FROM "docs$articles" ORDER BY id`}, errs.CodeInvalidInput, "source_query: ORDER BY not allowed"},
		{"union", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT id FROM "docs$articles" UNION ALL SELECT id FROM "docs$articles"`}, errs.CodeInvalidInput, "source_query: "},
		{"window", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT row_number() OVER () AS n FROM "docs$articles"`}, errs.CodeInvalidInput, "source_query: window functions not allowed"},
		{"subquery", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT (SELECT 1) AS one, id FROM "docs$articles"`}, errs.CodeInvalidInput, "source_query: subqueries are not allowed"},
		{"two statements", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT id FROM "docs$articles"; DROP TABLE x`}, errs.CodeInvalidInput, "source_query: only one statement"},
		{"dollar quote", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT $$x$$ AS s, id FROM "docs$articles"`}, errs.CodeInvalidInput, "source_query: '$'"},
		{"no from", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT 1 AS x`}, errs.CodeInvalidInput, "source_query: no FROM clause"},
		{"table function", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT * FROM read_csv('/etc/passwd')`}, errs.CodeInvalidInput, "source_query: FROM must name the source table"},
		{"cr ends a comment", nil, CreateRequest{Kind: "query", SourceQuery: "SELECT * FROM \"docs$articles\" --x\r; CREATE OR REPLACE MACRO lower(x) AS 'pwned'; SELECT 7 AS id"}, errs.CodeInvalidInput, "source_query: only one statement"},
		{"cr hides a window", nil, CreateRequest{Kind: "query", SourceQuery: "SELECT id, 1 --x\r + row_number() OVER ()\n AS n FROM \"docs$articles\""}, errs.CodeInvalidInput, "source_query: window functions not allowed"},
		{"attach", nil, CreateRequest{Kind: "udtf", SourceQuery: `SELECT * FROM "docs$articles"; ATTACH ':memory:' AS m`}, errs.CodeInvalidInput, "source_query: only one statement"},
		{"query() in udtf", nil, CreateRequest{Kind: "udtf", SourceQuery: `SELECT * FROM "docs$articles", query('SELECT 1')`}, errs.CodeInvalidInput, "source_query: "},
		{"query() rowwise", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT id, (SELECT 1 FROM query_table('docs$articles') LIMIT 1) AS x FROM "docs$articles"`}, errs.CodeInvalidInput, "source_query: "},
		{"getvariable", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT id, getvariable('x') AS v FROM "docs$articles"`}, errs.CodeInvalidInput, "source_query: function getvariable() not allowed"},
		{"pivot", nil, CreateRequest{Kind: "udtf", SourceQuery: `PIVOT "docs$articles" ON lang USING count(*)`}, errs.CodeInvalidInput, "source_query: "},
		{"other table in udtf", nil, CreateRequest{Kind: "udtf", SourceQuery: `SELECT * FROM "docs$articles" UNION ALL SELECT * FROM "docs$taken"`}, errs.CodeInvalidInput, `source_query: reads table "docs$taken"`},
		{"unknown column", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT nope FROM "docs$articles"`}, errs.CodeInvalidInput, "source_query: Binder Error"},
		{"syntax", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT id, FROM "docs$articles" WHERE`}, errs.CodeInvalidInput, "source_query: Parser Error"},
		{"reserved name", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT id AS __x FROM "docs$articles"`}, errs.CodeInvalidInput, `source_query: output column "__x"`},
		{"selected twice", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT id, id FROM "docs$articles"`}, errs.CodeInvalidInput, `source_query: output column "id" selected twice`},
		{"missing source", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT id FROM "docs$nope"`}, errs.CodeTableNotFound, "source_query: source table docs$nope not found"},
		{"reads itself", []string{"docs", "self"}, CreateRequest{Kind: "query", SourceQuery: `SELECT id FROM "docs$self"`}, errs.CodeInvalidInput, "source_query: a view cannot read itself"},
		{"view exists", []string{"docs", "taken"}, CreateRequest{Kind: "query", SourceQuery: queryView}, errs.CodeTableAlreadyExists, "table docs$taken already exists"},
		{"no namespace", []string{"nope", "v"}, CreateRequest{Kind: "query", SourceQuery: queryView}, errs.CodeNamespaceNotFound, "namespace nope not found"},
		{"schema not base64", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT id FROM "docs$articles"`, OutputSchema: "!!"}, errs.CodeInvalidInput, "output_schema: not a base64 Arrow IPC schema"},
		{"schema wrong type", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT id FROM "docs$articles"`,
			OutputSchema: encodeSchema(t, u64, arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int32})}, errs.CodeInvalidInput, `output_schema: field "id" has type int32, the view produces int64`},
		{"schema wrong name", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT id FROM "docs$articles"`,
			OutputSchema: encodeSchema(t, u64, arrow.Field{Name: "ident", Type: arrow.PrimitiveTypes.Int64})}, errs.CodeInvalidInput, `output_schema: field 1 is "ident", the view produces "id"`},
		{"schema missing field", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT id, title FROM "docs$articles"`,
			OutputSchema: encodeSchema(t, u64, i64)}, errs.CodeInvalidInput, `output_schema: field 2 "title" (utf8) missing`},
		{"schema extra field", nil, CreateRequest{Kind: "query", SourceQuery: `SELECT id FROM "docs$articles"`,
			OutputSchema: encodeSchema(t, u64, i64, arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64})}, errs.CodeInvalidInput, `output_schema: field 2 "x" (int64) is not produced`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.id
			if id == nil {
				id = []string{"docs", "v"}
			}
			_, err := b.e.CreateView(b.ctx, id, tc.req)
			wantErr(t, err, tc.code, tc.msg)
		})
	}

	// A matching output_schema is accepted and kept (nullability may
	// differ from what the query produces).
	given := encodeSchema(t, u64, i64, arrow.Field{Name: "title", Type: arrow.BinaryTypes.String, Nullable: false})
	id := b.create(t, "typed", CreateRequest{Kind: "query", SourceQuery: `SELECT id, title FROM "docs$articles"`, OutputSchema: given})
	v, err := b.e.View(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Def.OutputSchema != given || v.Schema.Field(2).Nullable {
		t.Fatalf("stored schema %s", v.Schema)
	}
	b.refresh(t, id, "j", Options{})
	eqRows(t, "typed view", b.rows(t, id), []string{"0:0|1|Alpha", "0:1|2|Beta", "0:2|3|Gamma", "0:3|4|Delta"})
}

func TestViewLookup(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0)
	_, err := b.e.View(b.ctx, srcID)
	wantErr(t, err, errs.CodeInvalidInput, "table docs$articles is not a materialized view")
	_, err = b.e.View(b.ctx, []string{"docs", "nope"})
	wantErr(t, err, errs.CodeTableNotFound, "table docs$nope not found")

	// The stored definition keeps the udtf_spec as given, and its manifest.
	manifest := `{"pip":["tiktoken"]}`
	entry := chunkerEntry(fixed4)
	entry.Manifest = &manifest
	batch := true
	entry.Batch = &batch
	id := b.create(t, "chunks", CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`, UDTFSpec: entry, AutoRefresh: true})
	v, err := b.e.View(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var stored UDTFEntry
	if err := json.Unmarshal(v.Def.UDTFSpec, &stored); err != nil {
		t.Fatal(err)
	}
	if v.Def.Manifest != manifest || !v.Def.AutoRefresh || stored.UDTFSha != entry.UDTFSha || stored.Batch == nil || !*stored.Batch || v.chunkerSpec().ChunkSize != 4 {
		t.Fatalf("definition %+v, entry %+v", v.Def, stored)
	}
}

func TestPrepare(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0)
	q := b.create(t, "en", CreateRequest{Kind: "query", SourceQuery: queryView})
	manifest := `{"pip":["x"]}`
	entry := chunkerEntry(fixed4)
	entry.Manifest = &manifest
	c := b.create(t, "chunks", CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`, UDTFSpec: entry})

	var o Options
	if err := b.e.Prepare(b.ctx, q, &o); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(o, Options{SourceTaskSize: 1024, Concurrency: 8, IntraApplierConcurrency: 1, MaxRowsPerFragment: 131072, Cluster: "default"}) {
		t.Fatalf("defaults %+v", o)
	}
	o = Options{}
	if err := b.e.Prepare(b.ctx, c, &o); err != nil || o.ManifestChecksum != sha256Hex(manifest) {
		t.Fatalf("stored manifest checksum %q, %v", o.ManifestChecksum, err)
	}
	o = Options{Manifest: `{"pip":[]}`, SrcVersion: 1, Cluster: "gpu"}
	if err := b.e.Prepare(b.ctx, c, &o); err != nil || o.ManifestChecksum != sha256Hex(`{"pip":[]}`) || o.Cluster != "gpu" {
		t.Fatalf("inline manifest checksum %+v, %v", o, err)
	}

	n, neg := int64(3), int64(-1)
	for _, tc := range []struct {
		name string
		id   []string
		opts Options
		code errs.Code
		msg  string
	}{
		{"limit on query view", q, Options{OutputLimit: &n}, errs.CodeInvalidInput, "output_limit: view"},
		{"negative limit", c, Options{OutputLimit: &neg}, errs.CodeInvalidInput, "output_limit: must be >= 0"},
		{"unknown src_version", c, Options{SrcVersion: 9}, errs.CodeInvalidInput, "src_version: source table docs$articles has no version 9"},
		{"bad manifest", c, Options{Manifest: `{"pip":`}, errs.CodeInvalidInput, "manifest: not a JSON object"},
		{"manifest not an object", c, Options{Manifest: `[1]`}, errs.CodeInvalidInput, "manifest: not a JSON object"},
		{"manifest with a duplicate key", c, Options{Manifest: `{"pip":1,"pip":2}`}, errs.CodeInvalidInput, "manifest: not a valid JSON object: duplicate key \"pip\""},
		{"negative task size", c, Options{SourceTaskSize: -1}, errs.CodeInvalidInput, "source_task_size: must be > 0"},
		{"huge task size", c, Options{SourceTaskSize: 1<<20 + 1}, errs.CodeInvalidInput, "source_task_size: must be > 0 and <= 1048576"},
		{"huge concurrency", c, Options{Concurrency: 5000}, errs.CodeInvalidInput, "concurrency: "},
		{"huge intra concurrency", c, Options{IntraApplierConcurrency: 65}, errs.CodeInvalidInput, "intra_applier_concurrency: "},
		{"huge fragments", c, Options{MaxRowsPerFragment: 1<<24 + 1}, errs.CodeInvalidInput, "max_rows_per_fragment: "},
		{"not a view", srcID, Options{}, errs.CodeInvalidInput, "table docs$articles is not a materialized view"},
		{"missing view", []string{"docs", "nope"}, Options{}, errs.CodeTableNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			wantErr(t, b.e.Prepare(b.ctx, tc.id, &o), tc.code, tc.msg)
		})
	}

	// A source dropped after the view was created.
	if err := b.cat.DropTable(b.ctx, srcID); err != nil {
		t.Fatal(err)
	}
	_, err := b.e.Plan(b.ctx, c, "j", Options{})
	wantErr(t, err, errs.CodeTableNotFound, "source table docs$articles of view docs$chunks not found")
	_, err = b.e.Plan(b.ctx, c, "bad/id", Options{})
	wantErr(t, err, errs.CodeInvalidInput, "job id")
}

func TestAnalyzeQuery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		q, source, name, rowwise string
	}{
		{`SELECT id FROM "docs$articles"`, "docs$articles", "docs$articles", `SELECT _rowaddr AS __source_row_id, id FROM "docs$articles"`},
		{`select extract(year from ts) AS y from docs$a where x = 'FROM y'`, "docs$a", "docs$a", `select _rowaddr AS __source_row_id, extract(year from ts) AS y from docs$a where x = 'FROM y'`},
		{"SELECT -- FROM nope\n id FROM t AS x WHERE id > 1;", "t", "t", "SELECT _rowaddr AS __source_row_id, -- FROM nope\n id FROM t AS x WHERE id > 1"},
	} {
		sq, err := analyzeQuery(tc.q, true)
		if err != nil {
			t.Fatalf("%s: %v", tc.q, err)
		}
		if table.JoinID(sq.Source) != tc.source || sq.Name != tc.name || sq.Rowwise != tc.rowwise {
			t.Fatalf("%s: got %+v", tc.q, sq)
		}
	}
	// udtf queries may use CTEs; the table is the first FROM of a SELECT.
	sq, err := analyzeQuery(`WITH x AS (SELECT lang FROM "ns$t") SELECT lang, count(*) FROM x GROUP BY lang`, false)
	if err != nil || table.JoinID(sq.Source) != "ns$t" {
		t.Fatalf("cte: %+v %v", sq, err)
	}
}
