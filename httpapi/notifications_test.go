package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/iceberg"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/internal/icebergtest"
	"github.com/mvq-dev/mvq/table"
)

const notifyPath = "/api/catalog/v1/mvq/namespaces/db/tables/docs/notifications"

// notifySetup serves the API over a warehouse in wh (a new one when
// empty) with the lake folder as the one allowed location.
func notifySetup(t *testing.T, wh, lakeDir string) *client {
	t.Helper()
	if wh == "" {
		wh = t.TempDir()
	}
	allowed, err := iceberg.ParseAllowed("file://" + lakeDir + ", s3://bucket/other")
	if err != nil {
		t.Fatal(err)
	}
	w, err := table.OpenWarehouse(context.Background(), "file://"+wh)
	if err != nil {
		t.Fatal(err)
	}
	db, err := duck.Open(duck.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	cat := table.NewCatalog(w, db, table.Options{Indexes: index.Maintenance()})
	srv := httptest.NewServer(httpapi.New(httpapi.Config{AllowedLocations: allowed}, cat, nil).Handler())
	t.Cleanup(func() { srv.Close(); db.Close(); w.Close() })
	return &client{t: t, url: srv.URL, dir: wh}
}

// notify sends a notification body and returns the status and the
// Iceberg error (zero for a 204), checking the error body's shape.
func (c *client) notify(path string, body []byte) (int, httpapi.IcebergErrorModel) {
	c.t.Helper()
	st, raw := c.do(http.MethodPost, path, "application/json", body)
	if st == http.StatusNoContent {
		if len(raw) != 0 {
			c.t.Fatalf("204 with a body: %s", raw)
		}
		return st, httpapi.IcebergErrorModel{}
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc) != 1 || doc["error"] == nil {
		c.t.Fatalf("%d: error body is not {\"error\": {...}}: %s", st, raw)
	}
	var e httpapi.IcebergErrorModel
	dec := json.NewDecoder(strings.NewReader(string(doc["error"])))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Message == "" || e.Type == "" || e.Code != st {
		c.t.Fatalf("%d: error model %s (decode: %v)", st, doc["error"], err)
	}
	return st, e
}

func (c *client) wantNotify(path string, body []byte, status int, typ, inMessage string) {
	c.t.Helper()
	st, e := c.notify(path, body)
	if st != status || e.Type != typ || !strings.Contains(e.Message, inMessage) {
		c.t.Fatalf("notification: %d %s %q, want %d %s mentioning %q", st, e.Type, e.Message, status, typ, inMessage)
	}
}

func (c *client) countRows(id string) string {
	c.t.Helper()
	st, raw := c.do("POST", "/v1/table/"+id+"/count_rows", "application/json", nil)
	if st != 200 {
		return fmt.Sprintf("%d", st)
	}
	return string(raw)
}

// snapshotIDs lists the iceberg.snapshot_id of each version of id.
func (c *client) snapshotIDs(id string) []string {
	c.t.Helper()
	st, m := c.post("/v1/table/"+id+"/version/list", map[string]any{})
	c.want(st, m, 200, "")
	var out []string
	for _, v := range m["versions"].([]any) {
		md, _ := v.(map[string]any)["metadata"].(map[string]any)
		s, _ := md[iceberg.MetaSnapshotID].(string)
		out = append(out, s)
	}
	return out
}

func TestNotificationRules(t *testing.T) {
	t.Parallel()
	lakeDir := t.TempDir()
	lake := icebergtest.NewLake(t, lakeDir, "docs", false)
	c := notifySetup(t, "", lakeDir)
	st, m := c.post("/v1/namespace/db/create", map[string]any{})
	c.want(st, m, 200, "")

	// UPDATE and DROP of a table never registered: 404.
	c.wantNotify(notifyPath, lake.Notification("UPDATE", 5), 404, "NoSuchTableException", "db$docs")
	c.wantNotify(notifyPath, lake.Notification("DROP", 5), 404, "NoSuchTableException", "db$docs")

	lake.Append(icebergtest.Row{ID: 1, Text: "one"}, icebergtest.Row{ID: 2, Text: "two"})
	c.wantNotify(notifyPath, lake.Notification("CREATE", 10), 204, "", "")
	if n := c.countRows("db$docs"); n != "2" {
		t.Fatalf("count after CREATE: %s", n)
	}
	first := fmt.Sprint(lake.SnapshotID())
	if ids := c.snapshotIDs("db$docs"); len(ids) != 1 || ids[0] != first {
		t.Fatalf("versions after CREATE: snapshot ids %v, want [%s]", ids, first)
	}

	// Equal and older timestamps: 409, nothing changes.
	lake.Append(icebergtest.Row{ID: 3, Text: "three"})
	c.wantNotify(notifyPath, lake.Notification("UPDATE", 10), 409, "AlreadyExistsException", "newer timestamp")
	c.wantNotify(notifyPath, lake.Notification("UPDATE", 9), 409, "AlreadyExistsException", "newer timestamp")
	if n := c.countRows("db$docs"); n != "2" {
		t.Fatalf("count after refused notifications: %s", n)
	}
	// table-uuid differs from the registered one: 409.
	c.wantNotify(notifyPath, icebergtest.NotificationFor("UPDATE", "docs", 11, "2f1d6c1e-5a4b-4c3d-9e8f-7a6b5c4d3e2f", lake.MetadataLocation()), 409, "CommitFailedException", "table-uuid")
	c.wantNotify(notifyPath, lake.Notification("UPDATE", 11), 204, "", "")
	if n := c.countRows("db$docs"); n != "3" {
		t.Fatalf("count after UPDATE: %s", n)
	}
	if ids := c.snapshotIDs("db$docs"); len(ids) != 2 || ids[1] != fmt.Sprint(lake.SnapshotID()) {
		t.Fatalf("versions after UPDATE: snapshot ids %v", ids)
	}
	// CREATE of a registered table is an UPDATE.
	lake.Append(icebergtest.Row{ID: 4, Text: "four"})
	c.wantNotify(notifyPath, lake.Notification("CREATE", 12), 204, "", "")
	if n := c.countRows("db$docs"); n != "4" {
		t.Fatalf("count after second CREATE: %s", n)
	}

	// Writes to an external table are refused.
	st, m = c.post("/v1/table/db$docs/insert", `[{"id": 9, "text": "x"}]`)
	c.want(st, m, 400, "external table")
	st, m = c.post("/v1/table/db$docs/delete", map[string]any{"predicate": "id = 1"})
	c.want(st, m, 400, "external table")
	st, m = c.post("/v1/table/db$docs/restore", map[string]any{"version": 1})
	c.want(st, m, 400, "external table")
	if n := c.countRows("db$docs"); n != "4" {
		t.Fatalf("count after refused writes: %s", n)
	}

	// Ordering survives a restart: a new server over the same warehouse.
	c2 := notifySetup(t, c.dir, lakeDir)
	c2.wantNotify(notifyPath, lake.Notification("UPDATE", 12), 409, "AlreadyExistsException", "newer timestamp")
	c2.wantNotify(notifyPath, lake.Notification("CREATE", 11), 409, "AlreadyExistsException", "newer timestamp")

	// DROP: older is refused, newer unregisters; a replayed CREATE from
	// before the drop is refused, a newer one registers again.
	c2.wantNotify(notifyPath, lake.Notification("DROP", 12), 409, "AlreadyExistsException", "newer timestamp")
	c2.wantNotify(notifyPath, lake.Notification("DROP", 13), 204, "", "")
	st, m = c2.post("/v1/table/db$docs/describe", map[string]any{})
	c2.want(st, m, 404, "not found")
	c2.wantNotify(notifyPath, lake.Notification("UPDATE", 14), 404, "NoSuchTableException", "")
	c2.wantNotify(notifyPath, lake.Notification("CREATE", 13), 409, "AlreadyExistsException", "dropped")
	c2.wantNotify(notifyPath, lake.Notification("CREATE", 15), 204, "", "")
	if n := c2.countRows("db$docs"); n != "4" {
		t.Fatalf("count after CREATE following DROP: %s", n)
	}
}

func TestNotificationValidateAndBadRequests(t *testing.T) {
	t.Parallel()
	lakeDir := t.TempDir()
	lake := icebergtest.NewLake(t, lakeDir, "docs", false)
	lake.Append(icebergtest.Row{ID: 1, Text: "one"})
	c := notifySetup(t, "", lakeDir)
	st, m := c.post("/v1/namespace/db/create", map[string]any{})
	c.want(st, m, 200, "")
	validate := func(loc string) []byte {
		return icebergtest.NotificationFor("VALIDATE", "docs", 1, lake.UUID(), loc)
	}

	// VALIDATE: a folder or a metadata file inside the allowed locations
	// (even one that does not exist yet: nothing is read), nothing made.
	c.wantNotify(notifyPath, validate(lakeDir), 204, "", "")
	c.wantNotify(notifyPath, validate("file://"+filepath.Join(lakeDir, "db", "new", "metadata")), 204, "", "")
	c.wantNotify(notifyPath, validate(lake.MetadataLocation()), 204, "", "")
	st, m = c.post("/v1/namespace/db/table/list", map[string]any{})
	c.want(st, m, 200, "")
	if tables, _ := m["tables"].([]any); len(tables) != 0 {
		t.Fatalf("VALIDATE created %v", tables)
	}
	// Outside the allowed locations: 403, for VALIDATE and CREATE alike.
	for _, loc := range []string{"/etc", lakeDir + "-sibling/x.metadata.json", lakeDir + "/../escape", "s3://bucket/elsewhere", "file://" + c.dir} {
		c.wantNotify(notifyPath, validate(loc), 403, "ForbiddenException", "allowed location")
		c.wantNotify(notifyPath, icebergtest.NotificationFor("CREATE", "docs", 1, lake.UUID(), loc), 403, "ForbiddenException", "allowed location")
	}
	c.wantNotify(notifyPath, validate("s3://bucket/other/t"), 204, "", "")
	c.wantNotify("/api/catalog/v1/mvq/namespaces/nope/tables/docs/notifications", validate(lakeDir), 404, "NoSuchNamespaceException", "nope")

	// Malformed bodies and unknown types: 400.
	for _, body := range []string{
		`{`, `[]`, `{"notification-type": "CREATE"}`,
		`{"notification-type": "NOPE", "payload": {}}`,
		`{"notification-type": "UNKNOWN", "payload": {"table-name": "docs", "timestamp": 1, "table-uuid": "u", "metadata-location": "/x"}}`,
		`{"notification-type": "CREATE", "payload": {"table-name": "docs", "timestamp": "1", "table-uuid": "u", "metadata-location": "/x"}}`,
		`{"notification-type": "CREATE", "payload": {"table-name": "docs", "table-uuid": "u", "metadata-location": "/x"}}`,
		`{"notification-type": "CREATE", "payload": {"table-name": "other", "timestamp": 1, "table-uuid": "u", "metadata-location": "/x"}}`,
		`{"notification-type": "CREATE", "payload": {"table-name": "docs", "timestamp": 1, "table-uuid": "u", "metadata-location": "/x", "extra": 1}}`,
		`{"notification-type": "CREATE", "notification-type": "DROP", "payload": {}}`,
	} {
		if st, e := c.notify(notifyPath, []byte(body)); st != 400 || e.Type != "BadRequestException" {
			t.Fatalf("%s: %d %v, want 400 BadRequestException", body, st, e)
		}
	}
	// A metadata file that does not exist (inside the allowed location),
	// and a table-uuid that is not the metadata's: 400, nothing made.
	c.wantNotify(notifyPath, icebergtest.NotificationFor("CREATE", "docs", 1, lake.UUID(), lakeDir+"/missing.metadata.json"), 400, "BadRequestException", "does not exist")
	c.wantNotify(notifyPath, icebergtest.NotificationFor("CREATE", "docs", 1, "2f1d6c1e-5a4b-4c3d-9e8f-7a6b5c4d3e2f", lake.MetadataLocation()), 400, "BadRequestException", "table-uuid")
	st, m = c.post("/v1/table/db$docs/describe", map[string]any{})
	c.want(st, m, 404, "not found")

	// A wrong prefix is a 404 in the Iceberg shape.
	c.wantNotify("/api/catalog/v1/other/namespaces/db/tables/docs/notifications", lake.Notification("CREATE", 1), 404, "NoSuchTableException", "prefix")
	// Namespace parts are separated by 0x1F.
	st, m = c.post("/v1/namespace/db$sub/create", map[string]any{})
	c.want(st, m, 200, "")
	c.wantNotify("/api/catalog/v1/mvq/namespaces/db%1Fsub/tables/docs/notifications", lake.Notification("CREATE", 1), 204, "", "")
	if n := c.countRows("db$sub$docs"); n != "1" {
		t.Fatalf("count of db$sub$docs: %s", n)
	}
}

// TestNotificationLocationsOfFiles: metadata inside the allowed locations
// naming data files outside them is refused; nothing is read from there.
func TestNotificationLocationsOfFiles(t *testing.T) {
	t.Parallel()
	lakeDir := t.TempDir()
	lake := icebergtest.NewLake(t, lakeDir, "docs", false)
	lake.Append(icebergtest.Row{ID: 1, Text: "one"})
	// Only the metadata folder is allowed, not data/.
	c := notifySetup(t, "", filepath.Join(lakeDir, "db", "docs", "metadata"))
	st, m := c.post("/v1/namespace/db/create", map[string]any{})
	c.want(st, m, 200, "")
	c.wantNotify(notifyPath, lake.Notification("CREATE", 1), 403, "ForbiddenException", "allowed location")
	st, m = c.post("/v1/table/db$docs/describe", map[string]any{})
	c.want(st, m, 404, "not found")
}

// TestNotificationConcurrent: notifications for one table at once. With
// distinct timestamps the newest always wins and the versions committed
// carry strictly increasing timestamps; with one timestamp exactly one is
// admitted.
func TestNotificationConcurrent(t *testing.T) {
	t.Parallel()
	lakeDir := t.TempDir()
	lake := icebergtest.NewLake(t, lakeDir, "docs", false)
	lake.Append(icebergtest.Row{ID: 1, Text: "one"})
	c := notifySetup(t, "", lakeDir)
	st, m := c.post("/v1/namespace/db/create", map[string]any{})
	c.want(st, m, 200, "")
	c.wantNotify(notifyPath, lake.Notification("CREATE", 1), 204, "", "")

	lake.Append(icebergtest.Row{ID: 2, Text: "two"})
	const n = 8
	run := func(ts func(i int) int64) []int {
		var wg sync.WaitGroup
		statuses := make([]int, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i], _ = c.notify(notifyPath, lake.Notification("UPDATE", ts(i)))
			}()
		}
		wg.Wait()
		return statuses
	}
	same := run(func(int) int64 { return 100 })
	won := 0
	for _, s := range same {
		switch s {
		case 204:
			won++
		case 409:
		default:
			t.Fatalf("status %d", s)
		}
	}
	if won != 1 {
		t.Fatalf("%d notifications with one timestamp admitted, want exactly 1: %v", won, same)
	}
	// Newer timestamps, the snapshot mirrored already: the newest is
	// admitted, none commits a version.
	distinct := run(func(i int) int64 { return 200 + int64(i) })
	if distinct[n-1] != 204 {
		t.Fatalf("the newest notification was refused: %v", distinct)
	}
	c.wantNotify(notifyPath, lake.Notification("UPDATE", 200+n-1), 409, "AlreadyExistsException", "newer timestamp")
	versions := func() []int64 {
		st, m := c.post("/v1/table/db$docs/version/list", map[string]any{})
		c.want(st, m, 200, "")
		var out []int64
		for _, v := range m["versions"].([]any) {
			md, _ := v.(map[string]any)["metadata"].(map[string]any)
			var ts int64
			fmt.Sscan(md[iceberg.MetaTimestamp].(string), &ts)
			if len(out) > 0 && ts <= out[len(out)-1] {
				t.Fatalf("versions out of timestamp order: %d after %d", ts, out[len(out)-1])
			}
			out = append(out, ts)
		}
		return out
	}
	if vs := versions(); fmt.Sprint(vs) != "[1 100]" {
		t.Fatalf("versions by timestamp %v, want [1 100]: unchanged snapshots commit nothing", vs)
	}
	// A new snapshot announced by concurrent notifications: one version
	// mirrors it, the newest timestamp is admitted.
	lake.Append(icebergtest.Row{ID: 3, Text: "three"})
	distinct = run(func(i int) int64 { return 300 + int64(i) })
	wins := 0
	for _, s := range distinct {
		switch s {
		case 204:
			wins++
		case 409:
		default:
			t.Fatalf("status %d", s)
		}
	}
	if distinct[n-1] != 204 || wins == 0 {
		t.Fatalf("the newest notification was refused: %v", distinct)
	}
	if vs := versions(); len(vs) != 3 || vs[2] < 300 {
		t.Fatalf("versions by timestamp %v, want one more for the new snapshot", vs)
	}
	c.wantNotify(notifyPath, lake.Notification("UPDATE", 300+n-1), 409, "AlreadyExistsException", "newer timestamp")
	if n := c.countRows("db$docs"); n != "3" {
		t.Fatalf("count: %s", n)
	}
}

// TestNotificationAuth: the notification route takes credentials as every
// route does and needs write on the table it names; its 401 and 403 are
// in the Iceberg error shape.
func TestNotificationAuth(t *testing.T) {
	lakeDir := t.TempDir()
	allowed, err := iceberg.ParseAllowed(lakeDir)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, httpapi.Config{Auth: jwtAuth(t), AllowedLocations: allowed})
	root := mint(t, jwtSecret, "root", time.Hour, grant("*", auth.Read, auth.Write, auth.Refresh, auth.Admin))
	mustStatus(t, s.do("POST", "/v1/namespace/db/create", `{}`, bearer(root)...), 200)
	body := string(icebergtest.NotificationFor("VALIDATE", "docs", 1, "2f1d6c1e-5a4b-4c3d-9e8f-7a6b5c4d3e2f", lakeDir))
	for _, c := range []struct {
		hdr    []string
		status int
		typ    string
	}{
		{nil, 401, "NotAuthorizedException"},
		{bearer("not-a-token"), 401, "NotAuthorizedException"},
		{bearer(mint(t, jwtSecret, "reader", time.Hour, grant("db", auth.Read, auth.Refresh))), 403, "ForbiddenException"},
		{bearer(mint(t, jwtSecret, "other", time.Hour, grant("other", auth.Write))), 403, "ForbiddenException"},
		{bearer(mint(t, jwtSecret, "writer", time.Hour, grant("db", auth.Write))), 204, ""},
	} {
		r := s.do("POST", notifyPath, body, c.hdr...)
		if r.status != c.status {
			t.Fatalf("%v: %d %s, want %d", c.hdr, r.status, r.body, c.status)
		}
		if c.typ == "" {
			continue
		}
		e, _ := r.json["error"].(map[string]any)
		if len(r.json) != 1 || e["type"] != c.typ || e["code"] != float64(c.status) || e["message"] == "" {
			t.Fatalf("%v: error body %s, want type %s", c.hdr, r.body, c.typ)
		}
	}
}
