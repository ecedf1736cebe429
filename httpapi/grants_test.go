package httpapi_test

import (
	"testing"
	"time"

	"github.com/mvq-dev/mvq/auth"
)

// TestNamespaceGrantSkipsTheTableOfItsName: a grant on namespace A covers
// A and what is inside it, not a root-level table named A; a grant on
// A$sub not the table sub of A. A table grant covers its table only.
func TestNamespaceGrantSkipsTheTableOfItsName(t *testing.T) {
	s := startAuthServer(t, jwtAuth(t))
	all := []auth.Action{auth.Read, auth.Write, auth.Refresh, auth.Admin}
	root := bearer(mint(t, jwtSecret, "root", time.Hour, grant("*", all...)))
	mustStatus(t, s.do("POST", "/v1/namespace/A/create", `{}`, root...), 200)
	mustStatus(t, s.do("POST", "/v1/table/A/create", `[{"id": 1}]`, root...), 200) // a table at the root
	mustStatus(t, s.do("POST", "/v1/table/A$sub/create", `[{"id": 1}]`, root...), 200)
	mustStatus(t, s.do("POST", "/v1/namespace/A$sub/create", `{}`, root...), 200)
	mustStatus(t, s.do("POST", "/v1/table/A$t/create", `[{"id": 1}]`, root...), 200)

	alice := bearer(mint(t, jwtSecret, "alice", time.Hour, grant("A", all...)))
	for _, rt := range [][2]string{
		{"/v1/table/A/count_rows", `{}`},
		{"/v1/table/A/describe", `{}`},
		{"/v1/table/A/insert", `[{"id": 2}]`},
		{"/v1/table/A/drop", `{}`},
		{"/v1/table/B/create", `[{"id": 1}]`},
	} {
		r := s.do("POST", rt[0], rt[1], alice...)
		if r.status != 403 {
			t.Errorf("alice (namespace A) %s: %d %s", rt[0], r.status, r.body)
		}
	}
	mustStatus(t, s.do("POST", "/v1/table/A/count_rows", `{}`, root...), 200)
	mustStatus(t, s.do("POST", "/v1/table/A$t/count_rows", `{}`, alice...), 200)
	mustStatus(t, s.do("POST", "/v1/namespace/A/describe", `{}`, alice...), 200)

	subAdmin := bearer(mint(t, jwtSecret, "sam", time.Hour, grant("A$sub", all...)))
	mustStatus(t, s.do("POST", "/v1/table/A$sub/count_rows", `{}`, subAdmin...), 403)
	mustStatus(t, s.do("POST", "/v1/table/A$sub/drop", `{}`, subAdmin...), 403)
	mustStatus(t, s.do("POST", "/v1/namespace/A$sub/describe", `{}`, subAdmin...), 200)
	mustStatus(t, s.do("POST", "/v1/table/A$sub$t/create", `[{"id": 1}]`, subAdmin...), 200)

	one := bearer(mint(t, jwtSecret, "carol", time.Hour, auth.Grant{Table: "A$t", Actions: []auth.Action{auth.Read}}))
	mustStatus(t, s.do("POST", "/v1/table/A$t/count_rows", `{}`, one...), 200)
	mustStatus(t, s.do("POST", "/v1/table/A$sub/count_rows", `{}`, one...), 403)
	mustStatus(t, s.do("POST", "/v1/namespace/A/describe", `{}`, one...), 403)
	mustStatus(t, s.do("POST", "/v1/table/A$t/insert", `[{"id": 2}]`, one...), 403)
}
