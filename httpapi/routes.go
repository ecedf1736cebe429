package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/ui"
)

// route is one operation of the API: its method and path, the grant it
// needs (the auth middleware reads it from here) and its handler. Adding
// a route is adding one entry to routes (or, for the view and job routes,
// ViewRoutes.routes).
type route struct {
	method, path string
	rule         routeRule
	handler      func(*gin.Context) error
	// idempotent routes serve the Idempotency-Key header (idempotency.go).
	idempotent bool
}

// Rules: an action on a target; body marks a JSON object body, which may
// carry identity; open routes need no credentials.
var (
	open = routeRule{open: true}
)

func rule(action auth.Action, target targetKind, jsonBody bool) routeRule {
	return routeRule{action: action, target: target, jsonBody: jsonBody}
}

// routes is the API's route table, the view and job routes included when
// there is a view layer.
func (s *Server) routes() []route {
	const ns, tb = "/v1/namespace/:id", "/v1/table/:id"
	get, post := http.MethodGet, http.MethodPost
	rs := []route{
		// The jobs console: static files, no tenant data; what it shows
		// comes from API calls made with the user's token.
		{get, "/ui", open, func(c *gin.Context) error { c.Redirect(http.StatusMovedPermanently, ui.Prefix); return nil }, false},
		{get, ui.Prefix + "*file", open, wrap(s.console()), false},
		{get, "/healthz", open, func(c *gin.Context) error { c.JSON(http.StatusOK, gin.H{"status": "ok"}); return nil }, false},
		{get, "/readyz", open, s.readyz, false},

		{post, ns + "/create", rule(auth.Write, targetNSPath, true), s.createNamespace, false},
		{get, ns + "/list", rule(auth.Read, targetNSPath, false), s.listNamespaces, false},
		{post, ns + "/list", rule(auth.Read, targetNSPath, true), s.listNamespaces, false},
		{post, ns + "/describe", rule(auth.Read, targetNSPath, true), s.describeNamespace, false},
		{post, ns + "/drop", rule(auth.Admin, targetNSPath, true), s.dropNamespace, false},
		{post, ns + "/exists", rule(auth.Read, targetNSPath, true), s.namespaceExists, false},
		{get, ns + "/table/list", rule(auth.Read, targetNSPath, false), s.listTables, false},
		{post, ns + "/table/list", rule(auth.Read, targetNSPath, true), s.listTables, false},

		// create and insert bodies are Arrow IPC or JSON rows: credentials
		// come from headers only.
		{post, tb + "/create", rule(auth.Write, targetPath, false), s.createTable, true},
		{post, tb + "/insert", rule(auth.Write, targetPath, false), s.insertIntoTable, false},
		{post, tb + "/merge_insert", rule(auth.Write, targetPath, false), s.mergeInsert, false},
		{post, tb + "/describe", rule(auth.Read, targetPath, true), s.describeTable, false},
		{post, tb + "/exists", rule(auth.Read, targetPath, true), s.tableExists, false},
		{post, tb + "/count_rows", rule(auth.Read, targetPath, true), s.countRows, false},
		{post, tb + "/query", rule(auth.Read, targetPath, true), s.queryTable, false},
		{post, tb + "/delete", rule(auth.Write, targetPath, true), s.deleteFromTable, false},
		{post, tb + "/update", rule(auth.Write, targetPath, true), s.updateTable, false},
		{post, tb + "/drop", rule(auth.Write, targetPath, true), s.dropTable, false},
		{post, tb + "/restore", rule(auth.Write, targetPath, true), s.restoreTable, false},
		{post, tb + "/stats", rule(auth.Read, targetPath, true), s.tableStats, false},
		{get, tb + "/version/list", rule(auth.Read, targetPath, false), s.listVersions, false},
		{post, tb + "/version/list", rule(auth.Read, targetPath, true), s.listVersions, false},
		{post, tb + "/version/describe", rule(auth.Read, targetPath, true), s.describeVersion, false},
		{post, tb + "/version/create", rule(auth.Write, targetPath, true), s.createVersion, false},
		{post, tb + "/version/delete", rule(auth.Admin, targetPath, true), s.deleteVersions, false},

		// Catalog operations beyond create and drop (table_ops2.go).
		{get, "/v1/table", rule(auth.Admin, targetRoot, false), s.listAllTables, false},
		{post, tb + "/declare", rule(auth.Write, targetPath, true), s.declareTable, false},
		{post, tb + "/register", rule(auth.Admin, targetPath, true), s.registerTable, false},
		{post, tb + "/deregister", rule(auth.Admin, targetPath, true), s.deregisterTable, false},
		{post, tb + "/rename", rule(auth.Admin, targetPath, true), s.renameTable, false},

		// Tags and query plans (versions_tags.go), branches (branches.go).
		{post, tb + "/tags/create", rule(auth.Write, targetPath, true), s.createTag, false},
		{post, tb + "/tags/list", rule(auth.Read, targetPath, true), s.listTags, false},
		{post, tb + "/tags/version", rule(auth.Read, targetPath, true), s.tagVersion, false},
		{post, tb + "/tags/update", rule(auth.Write, targetPath, true), s.updateTag, false},
		{post, tb + "/tags/delete", rule(auth.Write, targetPath, true), s.deleteTag, false},
		{post, tb + "/explain_plan", rule(auth.Read, targetPath, true), s.explainPlan, false},
		{post, tb + "/analyze_plan", rule(auth.Read, targetPath, true), s.analyzePlan, false},
		{post, tb + "/branches/create", rule(auth.Write, targetPath, true), s.createBranch, false},
		{post, tb + "/branches/list", rule(auth.Read, targetPath, true), s.listBranches, false},
		{post, tb + "/branches/delete", rule(auth.Write, targetPath, true), s.deleteBranch, false},

		// Schema evolution (schema.go).
		{post, tb + "/alter_columns", rule(auth.Write, targetPath, true), s.alterColumns, false},
		{post, tb + "/drop_columns", rule(auth.Write, targetPath, true), s.dropColumns, false},
		{post, tb + "/update_field_metadata", rule(auth.Write, targetPath, true), s.updateFieldMetadata, false},
		{post, tb + "/schema_metadata/update", rule(auth.Write, targetPath, true), s.updateSchemaMetadata, false},

		// Indexes (index.go): building and dropping write, reading is read.
		{post, tb + "/create_index", rule(auth.Write, targetPath, true), s.createIndex(false), false},
		{post, tb + "/create_scalar_index", rule(auth.Write, targetPath, true), s.createIndex(true), false},
		{post, tb + "/index/list", rule(auth.Read, targetPath, true), s.listIndexes, false},
		{post, tb + "/index/:index_name/stats", rule(auth.Read, targetPath, true), s.indexStats, false},
		{post, tb + "/index/:index_name/drop", rule(auth.Write, targetPath, true), s.dropIndex, false},

		// Batches and transactions (txn.go), checked by the handler on
		// every table they name: each batch operation needs its single
		// route's rule (batchOpRoutes: a deregister_table or
		// delete_table_versions needs admin, as deregister and
		// version/delete do); a transaction's describe needs read, its
		// alter write.
		{post, "/v1/table/version/batch-create", rule(auth.Write, targetTables, true), s.batchCreateVersions, false},
		{post, "/v1/table/batch-commit", rule(auth.Write, targetTables, true), s.batchCommitTables, false},
		{post, "/v1/transaction/:id/describe", rule(auth.Read, targetTables, true), s.describeTransaction, false},
		{post, "/v1/transaction/:id/alter", rule(auth.Write, targetTables, true), s.alterTransaction, false},

		// A catalog notification changes the external table it names
		// (notifications.go).
		{post, notificationRoute, rule(auth.Write, targetCatalogTable, true), s.sendNotification, false},
	}
	if s.cfg.Metrics != nil {
		rs = append(rs, route{get, "/metrics", open, wrap(s.cfg.Metrics), false})
	}
	if s.views != nil {
		rs = append(rs, s.views.routes()...)
	}
	return rs
}

// routes are the view and job routes.
func (v *ViewRoutes) routes() []route {
	const mv = "/v1/materialized_view"
	get, post := http.MethodGet, http.MethodPost
	rs := []route{
		// A view create also needs read on its source_query's table.
		{post, mv + "/:id/create", routeRule{action: auth.Write, target: targetPath, jsonBody: true, source: true}, v.createView, true},
		{post, mv + "/:id/refresh", rule(auth.Refresh, targetPath, true), v.refreshView, true},
		{get, mv + "/:id/status", rule(auth.Read, targetPath, false), v.viewStatus, false},
		{post, mv + "/list", rule(auth.Read, targetNamespace, true), v.listViews, false},
		// mvq extensions: a view's refresh_every and target_lag, and the
		// suspension of its automatic refreshes (refresh_settings.go).
		{post, mv + "/:id/refresh_settings", rule(auth.Write, targetPath, true), v.updateRefreshSettings, false},
		{post, mv + "/:id/suspend", rule(auth.Write, targetPath, true), v.suspendView(true), false},
		{post, mv + "/:id/resume", rule(auth.Write, targetPath, true), v.suspendView(false), false},

		// Reading a job needs read or refresh on its view; its request's
		// manifest is shown with write (jobaccess.go).
		{get, "/v1/job/:job_id", rule(auth.Read, targetJobParam, false), v.getJob, false},
		{get, "/v1/job/:job_id/events", rule(auth.Read, targetJobParam, false), v.jobEvents, false},
		{post, "/v1/jobs/describe", rule(auth.Read, targetJobBody, true), v.describeJob, false},
		{post, "/v1/jobs/list", rule(auth.Read, targetJobList, true), v.listJobs, false},
		{post, "/v1/jobs/cancel", rule(auth.Refresh, targetJobBody, true), v.cancelJob, false},

		// Columns (columns.go): added by the engine, filled by a job.
		{post, "/v1/table/:id/add_columns", rule(auth.Write, targetPath, true), v.addColumns, true},
		{post, "/v1/table/:id/backfill_column", rule(auth.Refresh, targetPath, true), v.backfillColumn, true},
	}
	if v.Pools != nil {
		// The worker pools (pools.go): admin on the whole catalog.
		rs = append(rs,
			route{get, "/v1/admin/pools", rule(auth.Admin, targetRoot, false), v.listPools, false},
			route{post, "/v1/admin/pools/:cluster/pause", rule(auth.Admin, targetRoot, false), v.pausePool(true), false},
			route{post, "/v1/admin/pools/:cluster/resume", rule(auth.Admin, targetRoot, false), v.pausePool(false), false})
	}
	return rs
}

// handle adapts a route's handler to gin: the one place a returned error
// becomes the problem response (fail). A handler that has answered
// returns nil.
func handle(h func(*gin.Context) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := h(c); err != nil {
			fail(c, err)
		}
	}
}

// wrap serves a plain http.Handler as a route's handler.
func wrap(h http.Handler) func(*gin.Context) error {
	return func(c *gin.Context) error {
		h.ServeHTTP(c.Writer, c.Request)
		return nil
	}
}
