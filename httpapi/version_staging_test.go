package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"

	"github.com/mvq-dev/mvq/httpapi"
	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
	"github.com/mvq-dev/mvq/lance/dataset"
	"github.com/mvq-dev/mvq/table"
)

// Lance's external-manifest commit stages a version's manifest at
// _versions/{final manifest name}-{uuid} and then asks the namespace to
// create the version from it: that exact form is accepted; every other
// path under _versions/, and anything outside the table folder, is a 400
// naming manifest_path that writes nothing.
func TestVersionCreateFromLanceStagingPath(t *testing.T) {
	t.Parallel()
	c := setup(t, httpapi.Config{})
	if st, _ := c.do("POST", "/v1/table/t/create", "application/json", []byte(`[{"id": 1}]`)); st != 200 {
		t.Fatalf("create %d", st)
	}
	_, m := c.post("/v1/table/t/version/describe", map[string]any{"version": 1})
	man := manifestJSON(t, manifestFile(c.dir+"/t.lance", m["version"].(map[string]any)["manifest_path"].(string)))
	man["version"] = 2
	staged, _ := json.Marshal(man)
	stage := func(rel string) string {
		writeFile(t, c.dir+"/t.lance/"+rel, staged)
		return rel
	}
	id := uuid.NewString()
	v2, v3 := table.ManifestName(2, table.NamingV2), table.ManifestName(3, table.NamingV2)

	for _, bad := range []string{
		stage("_versions/" + v3 + "-" + id),                                    // another version's name
		stage("_versions/" + table.ManifestName(2, table.NamingV1) + "-" + id), // the V1 name, V2 requested
		stage("_versions/" + v2 + "-not-a-uuid"),
		stage("_versions/" + v2 + "-" + uuid.New().String()[:35]),
		stage("_versions/" + v2 + "-" + "{" + id + "}"),
		stage("_versions/" + v2 + id), // no dash
		stage("_versions/" + v2 + "-" + id + ".manifest"),
		stage("_versions/x/" + v2 + "-" + id), // nested
		"_versions/" + v2,                     // the final name itself
		"_versions/" + v2 + "-" + id + "/../../../../etc/passwd",
		"_versions/../_versions/" + v2 + "-" + id,
		"../_versions/" + v2 + "-" + id,
		"/_versions/" + v2 + "-" + id,
	} {
		st, m := c.post("/v1/table/t/version/create", map[string]any{"version": 2, "manifest_path": bad})
		c.want(st, m, 400, "manifest_path")
	}
	if _, err := readFile(c.dir + "/t.lance/_versions/" + v2); err == nil {
		t.Fatal("a refused request wrote version 2")
	}

	good := stage("_versions/" + v2 + "-" + id)
	st, m := c.post("/v1/table/t/version/create", map[string]any{"version": 2, "manifest_path": good})
	c.want(st, m, 200, "")
	if v := m["version"].(map[string]any); v["version"] != 2.0 || !strings.HasSuffix(v["manifest_path"].(string), "t.lance/_versions/"+v2) {
		t.Fatalf("version create: %v", m)
	}
	// The staged file is not a version: the list shows 1 and 2 only, and
	// the next commit is 3.
	st, m = c.post("/v1/table/t/version/list", map[string]any{})
	if st != 200 || len(m["versions"].([]any)) != 2 {
		t.Fatalf("version list: %d %v", st, m)
	}
	if st, m := c.post("/v1/table/t/insert", `[{"id": 2}]`); st != 200 || m["version"] != 3.0 {
		t.Fatalf("insert after the staged version: %d %v", st, m)
	}
	// The same staging form for V1 naming.
	man["version"] = 4
	staged, _ = json.Marshal(man)
	v1 := stage("_versions/" + table.ManifestName(4, table.NamingV1) + "-" + id)
	st, m = c.post("/v1/table/t/version/create", map[string]any{"version": 4, "manifest_path": v1, "naming_scheme": "V1"})
	c.want(st, m, 200, "")
}

// The first version of a declared table, created from a staged manifest,
// answers the e_tag of the manifest it published (as version/create of a
// later version does), not that of an empty file.
func TestDeclaredVersionCreateETag(t *testing.T) {
	t.Parallel()
	c := setup(t, httpapi.Config{})
	if st, _ := c.do("POST", "/v1/table/t/create", "application/json", []byte(`[{"id": 1}]`)); st != 200 {
		t.Fatalf("create %d", st)
	}
	if st, m := c.post("/v1/table/d/declare", map[string]any{}); st != 200 {
		t.Fatalf("declare: %d %v", st, m)
	}
	_, m := c.post("/v1/table/t/version/describe", map[string]any{"version": 1})
	staged, err := readFile(manifestFile(c.dir+"/t.lance", m["version"].(map[string]any)["manifest_path"].(string)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(c.dir+"/d.lance/data", os.DirFS(c.dir+"/t.lance/data")); err != nil {
		t.Fatal(err)
	}
	v1 := table.ManifestName(1, table.NamingV2)
	writeFile(t, c.dir+"/d.lance/_versions/"+v1+"-"+uuid.NewString(), staged)
	entries, _ := os.ReadDir(c.dir + "/d.lance/_versions")
	st, m := c.post("/v1/table/d/version/create", map[string]any{"version": 1, "manifest_path": "_versions/" + entries[0].Name()})
	c.want(st, m, 200, "")
	published, err := readFile(c.dir + "/d.lance/_versions/" + v1)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(published)
	if got, want := m["version"].(map[string]any)["e_tag"], `"`+hex.EncodeToString(sum[:16])+`"`; got != want {
		t.Fatalf("e_tag of the declared table's first version: %v, want %s (of the %d bytes published)", got, want, len(published))
	}
}

// TestVersionCreateRefusesDataLies: a staged manifest whose new
// fragment says more rows than its data file holds, or a schema of more
// columns than the file has, is refused with a 400 naming manifest_path;
// published, it would leave the table unreadable to every reader.
func TestVersionCreateRefusesDataLies(t *testing.T) {
	t.Parallel()
	for name, lie := range map[string]func(man map[string]any){
		"rows": func(man map[string]any) { man["fragments"].([]any)[0].(map[string]any)["rows"] = 1000 },
		"schema": func(man map[string]any) {
			s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "extra", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
			enc, err := table.EncodeSchema(s)
			if err != nil {
				t.Fatal(err)
			}
			man["schema"] = enc
		},
	} {
		t.Run(name, func(t *testing.T) {
			c, man := tableToStage(t, `[{"id": 1}, {"id": 2}, {"id": 3}]`)
			// A new fragment over the same file (one published version
			// has with other counts is checked as new).
			frag := man["fragments"].([]any)[0].(map[string]any)
			frag["id"] = 7
			man["next_fragment_id"] = 8
			lie(man)
			staged, _ := json.Marshal(man)
			writeFile(t, c.dir+"/t.lance/staged.json", staged)
			st, m := c.post("/v1/table/t/version/create", map[string]any{"version": 2, "manifest_path": "staged.json"})
			c.want(st, m, 400, "manifest_path")
			if _, n := c.do("POST", "/v1/table/t/count_rows", "application/json", []byte(`{}`)); strings.TrimSpace(string(n)) != "3" {
				t.Fatalf("count_rows after the refused version: %s, want 3", n)
			}
		})
	}
}

// TestVersionCreateMalformedLayoutIs400: a staged fragment layout mvq
// cannot write as a version (a column map without its leaf counts, an
// extra data file outside data/) is the client's error, not a 500.
func TestVersionCreateMalformedLayoutIs400(t *testing.T) {
	t.Parallel()
	for name, set := range map[string]map[string]any{
		"columns": {"columns": []int{0}},
		"extra":   {"parts": "0:0", "extra": `[{"path":"../../etc/x.lance","bytes":1}]`},
	} {
		t.Run(name, func(t *testing.T) {
			c, man := tableToStage(t, `[{"id": 1}]`)
			for k, v := range set {
				man["fragments"].([]any)[0].(map[string]any)[k] = v
			}
			staged, _ := json.Marshal(man)
			writeFile(t, c.dir+"/t.lance/staged.json", staged)
			st, m := c.post("/v1/table/t/version/create", map[string]any{"version": 2, "manifest_path": "staged.json"})
			c.want(st, m, 400, "manifest_path")
		})
	}
}

// TestVersionCreateRefusesIndexBeyondMaxFragment: a staged Lance manifest
// that drops a fragment and lowers max_fragment_id under a LanceDB index
// that covers it is refused: published, mvq's next insert took the
// dropped fragment's id, and LanceDB, taking it for indexed, did not find
// the acknowledged row.
func TestVersionCreateRefusesIndexBeyondMaxFragment(t *testing.T) {
	o := oracle.Need(t)
	t.Parallel()
	c := setup(t, httpapi.Config{}) // 4 rows per fragment
	rows := `[{"id":1},{"id":2},{"id":3},{"id":4},{"id":5},{"id":6},{"id":7},{"id":8},{"id":9},{"id":10},{"id":11},{"id":12}]`
	if st, _ := c.do("POST", "/v1/table/t/create", "application/json", []byte(rows)); st != 200 {
		t.Fatalf("create %d", st)
	}
	dir := c.dir + "/t.lance"
	o.CreateIndex(t, dir, "id", "btree") // version 2, covering fragments 0, 1, 2
	b, err := os.ReadFile(dir + "/_versions/" + table.ManifestName(2, table.NamingV2))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := dataset.DecodeManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	mf.Manifest.Version = 3
	mf.Manifest.Fragments = mf.Manifest.Fragments[:2]
	one := uint32(1)
	mf.Manifest.MaxFragmentId = &one
	mf.Transaction = nil
	if b, err = dataset.EncodeManifest(mf); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir+"/staged.manifest", b)
	st, m := c.post("/v1/table/t/version/create", map[string]any{"version": 3, "manifest_path": "staged.manifest"})
	c.want(st, m, 400, "manifest_path")
	if st, m := c.post("/v1/table/t/insert", `[{"id": 100}]`); st != 200 {
		t.Fatalf("insert: %d %v", st, m)
	}
	if n := o.Count(t, dir, "id = 100"); n != 1 {
		t.Fatalf("LanceDB counts %d rows with id = 100 after mvq acknowledged its insert, want 1", n)
	}
}

// tableToStage creates table t with rows (a JSON array) and answers its
// version 1 manifest in mvq's JSON form, as version 2, to change and stage.
func tableToStage(t *testing.T, rows string) (*client, map[string]any) {
	t.Helper()
	c := setup(t, httpapi.Config{})
	if st, _ := c.do("POST", "/v1/table/t/create", "application/json", []byte(rows)); st != 200 {
		t.Fatalf("create %d", st)
	}
	_, m := c.post("/v1/table/t/version/describe", map[string]any{"version": 1})
	man := manifestJSON(t, manifestFile(c.dir+"/t.lance", m["version"].(map[string]any)["manifest_path"].(string)))
	man["version"] = 2
	return c, man
}
