package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// Multi-table atomicity: version/batch-create, batch-commit and the
// transaction describe/alter (routes added by txnRoutes; the protocol is
// table/txn.go). Their routes' rule is targetTables: the handlers check
// the grant on every table involved.

// batchOpRoutes names, per batch operation, the single route that does
// the same to one table: an operation needs the grant that route's rule in
// in the route table asks for, on its table (one table of rules for both;
// TestBatchOperationsFollowTheirRoutes keeps them paired).
var batchOpRoutes = map[string]string{
	"create_table_version":  "POST /v1/table/:id/version/create",
	"declare_table":         "POST /v1/table/:id/declare",
	"delete_table_versions": "POST /v1/table/:id/version/delete",
	"deregister_table":      "POST /v1/table/:id/deregister",
}

// batchAction is the action batch operation op needs on its table: its
// single route's; admin for an operation without one (closed until
// mapped).
func (s *Server) batchAction(op string) auth.Action {
	if r, ok := s.rules[batchOpRoutes[op]]; ok {
		return r.action
	}
	return auth.Admin
}

// allowTable checks the request's identity for action on a table (nil
// without authentication, MVQ_AUTH=none).
func allowTable(c *gin.Context, action auth.Action, id []string) error {
	v, ok := c.Get(identityKey)
	if !ok {
		return nil
	}
	who, _ := v.(*auth.Identity)
	if who == nil || who.AllowsTable(action, id) {
		return nil
	}
	return denied(who, action, id)
}

// versionEntry is the spec's CreateTableVersionEntry.
type versionEntry struct {
	ID           []string          `json:"id"`
	Version      *int64            `json:"version"`
	Branch       *string           `json:"branch"`
	ManifestPath *string           `json:"manifest_path"`
	ManifestSize *int64            `json:"manifest_size"`
	ETag         *string           `json:"e_tag"`
	Metadata     map[string]string `json:"metadata"`
	NamingScheme *string           `json:"naming_scheme"`
}

// batchVersion checks an entry (field names it in errors) and the
// identity's grant on its table (version/create's).
func (s *Server) batchVersion(c *gin.Context, field string, e versionEntry) (table.BatchVersion, error) {
	if len(e.ID) == 0 {
		return table.BatchVersion{}, badInput("%s.id: required (the table identifier)", field)
	}
	for i, p := range e.ID {
		if err := table.ValidatePart(p); err != nil {
			return table.BatchVersion{}, badInput("%s.id[%d]: %v", field, i, err)
		}
	}
	if e.Version == nil {
		return table.BatchVersion{}, badInput("%s.version: required", field)
	}
	if err := nonNegative(field+".version", e.Version); err != nil {
		return table.BatchVersion{}, err
	}
	if e.ManifestPath == nil || *e.ManifestPath == "" {
		return table.BatchVersion{}, badInput("%s.manifest_path: required", field)
	}
	if err := nonNegative(field+".manifest_size", e.ManifestSize); err != nil {
		return table.BatchVersion{}, err
	}
	branch, err := batchBranch(field, e.Branch)
	if err != nil {
		return table.BatchVersion{}, err
	}
	scheme := table.NamingV2
	if e.NamingScheme != nil && *e.NamingScheme != "" {
		scheme = table.NamingScheme(strings.ToUpper(*e.NamingScheme))
	}
	if err := allowTable(c, s.batchAction("create_table_version"), e.ID); err != nil {
		return table.BatchVersion{}, err
	}
	return table.BatchVersion{
		Field: field, ID: e.ID, Version: uint64(*e.Version), ManifestPath: *e.ManifestPath,
		ManifestSize: e.ManifestSize, ETag: deref(e.ETag), Scheme: scheme, Metadata: e.Metadata, Branch: branch,
	}, nil
}

// batchVersions answers the TableVersion of each published version.
func batchVersions(res []table.BatchResult) []tableVersion {
	out := make([]tableVersion, len(res))
	for i, r := range res {
		sum := sha256.Sum256(r.Data)
		out[i] = versionOf(r.Table, r.File, r.Manifest, `"`+hex.EncodeToString(sum[:16])+`"`)
	}
	return out
}

// txnErr is err naming the transaction when one was recorded.
func txnErr(txnID string, err error) error {
	if txnID != "" && !strings.Contains(err.Error(), txnID) {
		err = fmt.Errorf("transaction %s: %w", txnID, err)
	}
	return err
}

func (s *Server) batchCreateVersions(c *gin.Context) error {
	var req struct {
		Entries *[]versionEntry `json:"entries"`
	}
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if req.Entries == nil || len(*req.Entries) == 0 {
		return badInput("entries: required, at least one")
	}
	entries := make([]table.BatchVersion, len(*req.Entries))
	for i, e := range *req.Entries {
		bv, err := s.batchVersion(c, fmt.Sprintf("entries[%d]", i), e)
		if err != nil {
			return err
		}
		entries[i] = bv
	}
	id, res, err := s.cat.CommitBatch(c.Request.Context(), "batch-create", entries)
	if err != nil {
		return txnErr(id, err)
	}
	c.JSON(http.StatusOK, gin.H{"transaction_id": id, "versions": batchVersions(res)})
	return nil
}

// commitOperation is the spec's CommitTableOperation.
type commitOperation struct {
	CreateTableVersion *struct {
		versionEntry
		Identity json.RawMessage   `json:"identity"`
		Context  map[string]string `json:"context"`
	} `json:"create_table_version"`
	DeclareTable *struct {
		ID              []string          `json:"id"`
		Location        *string           `json:"location"`
		VendCredentials *bool             `json:"vend_credentials"`
		Properties      map[string]string `json:"properties"`
		Identity        json.RawMessage   `json:"identity"`
		Context         map[string]string `json:"context"`
	} `json:"declare_table"`
	DeleteTableVersions *struct {
		ID     []string `json:"id"`
		Branch *string  `json:"branch"`
		Ranges *[]struct {
			Start *int64 `json:"start_version"`
			End   *int64 `json:"end_version"`
		} `json:"ranges"`
		Identity json.RawMessage   `json:"identity"`
		Context  map[string]string `json:"context"`
	} `json:"delete_table_versions"`
	DeregisterTable *struct {
		ID       []string          `json:"id"`
		Identity json.RawMessage   `json:"identity"`
		Context  map[string]string `json:"context"`
	} `json:"deregister_table"`
}

// batchBranch checks an entry's branch (absent, "" and "main": main); the
// entry then commits to that branch's line of versions.
func batchBranch(field string, b *string) (string, error) {
	if b == nil || *b == "" || *b == table.MainBranch {
		return "", nil
	}
	if err := table.ValidateBranch(*b); err != nil {
		return "", badInput("%s.branch: %v", field, err)
	}
	return *b, nil
}

// batchTableID checks an operation's table identifier.
func batchTableID(field string, id []string) error {
	if len(id) == 0 {
		return badInput("%s.id: required (the table identifier)", field)
	}
	for i, p := range id {
		if err := table.ValidatePart(p); err != nil {
			return badInput("%s.id[%d]: %v", field, i, err)
		}
	}
	return nil
}

func noIdentity(field string, raw json.RawMessage) error {
	if raw != nil && string(raw) != "null" {
		return badInput("%s.identity: send credentials once, in the request's identity or its headers", field)
	}
	return nil
}

// batchOther checks a declare_table, delete_table_versions or
// deregister_table operation (field names the operation) and the
// identity's grant on its table.
func (s *Server) batchOther(c *gin.Context, field string, op commitOperation) (table.BatchVersion, error) {
	ctx := c.Request.Context()
	switch {
	case op.DeclareTable != nil:
		d := op.DeclareTable
		field += ".declare_table"
		if err := batchTableID(field, d.ID); err != nil {
			return table.BatchVersion{}, err
		}
		if err := noIdentity(field, d.Identity); err != nil {
			return table.BatchVersion{}, err
		}
		if d.VendCredentials != nil && *d.VendCredentials {
			return table.BatchVersion{}, errs.Errorf(errs.CodeUnsupported, "%s.vend_credentials: a batch commit answers no storage_options; ask declare or describe for them", field)
		}
		if d.Location != nil && *d.Location != s.cat.TableLocation(d.ID) {
			return table.BatchVersion{}, badInput("%s.location: the directory catalog places table %s at %s, not %q", field, table.JoinID(d.ID), s.cat.TableLocation(d.ID), *d.Location)
		}
		if err := allowTable(c, s.batchAction("declare_table"), d.ID); err != nil {
			return table.BatchVersion{}, err
		}
		return table.BatchVersion{Field: field, ID: d.ID, Kind: table.BatchDeclare, Properties: d.Properties}, nil
	case op.DeleteTableVersions != nil:
		d := op.DeleteTableVersions
		field += ".delete_table_versions"
		if err := batchTableID(field, d.ID); err != nil {
			return table.BatchVersion{}, err
		}
		if err := noIdentity(field, d.Identity); err != nil {
			return table.BatchVersion{}, err
		}
		branch, err := batchBranch(field, d.Branch)
		if err != nil {
			return table.BatchVersion{}, err
		}
		if d.Ranges == nil {
			return table.BatchVersion{}, badInput("%s.ranges: required", field)
		}
		ranges := make([]table.VersionRange, len(*d.Ranges))
		for i, r := range *d.Ranges {
			if r.Start == nil || r.End == nil {
				return table.BatchVersion{}, badInput("%s.ranges[%d]: start_version and end_version are required", field, i)
			}
			ranges[i] = table.VersionRange{Start: *r.Start, End: *r.End}
		}
		if err := allowTable(c, s.batchAction("delete_table_versions"), d.ID); err != nil {
			return table.BatchVersion{}, err
		}
		return table.BatchVersion{Field: field, ID: d.ID, Kind: table.BatchDeleteVersions, Ranges: ranges, Branch: branch}, nil
	default:
		d := op.DeregisterTable
		field += ".deregister_table"
		if err := batchTableID(field, d.ID); err != nil {
			return table.BatchVersion{}, err
		}
		if err := noIdentity(field, d.Identity); err != nil {
			return table.BatchVersion{}, err
		}
		if err := allowTable(c, s.batchAction("deregister_table"), d.ID); err != nil {
			return table.BatchVersion{}, err
		}
		if t, err := s.cat.OpenTable(ctx, d.ID); err == nil {
			if m, err := t.Load(ctx, 0); err == nil && m.IsView() {
				return table.BatchVersion{}, badInput("%s: %s is a materialized view: deregister is not allowed (its jobs know it by name); drop it instead", field, table.JoinID(d.ID))
			}
		}
		// As a drop: a table views read stays unless they go first. A
		// batch cannot cascade (dropping the views would not be part of
		// its all-or-nothing commit).
		if v, ok := d.Context["cascade"]; ok && strings.EqualFold(v, "true") {
			return table.BatchVersion{}, badInput("%s.context.cascade: a batch cannot drop the views that read a table; drop them first, or deregister the table alone with cascade", field)
		}
		if _, direct, err := s.viewsToDrop(ctx, d.ID); err != nil {
			return table.BatchVersion{}, err
		} else if len(direct) > 0 {
			return table.BatchVersion{}, errs.Errorf(errs.CodeInvalidTableState, "%s: table %s has views that read it: %s; drop them first", field, table.JoinID(d.ID), joinIDs(direct))
		}
		return table.BatchVersion{Field: field, ID: d.ID, Kind: table.BatchDeregister}, nil
	}
}

func (s *Server) batchCommitTables(c *gin.Context) error {
	var req struct {
		Operations *[]commitOperation `json:"operations"`
	}
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if req.Operations == nil || len(*req.Operations) == 0 {
		return badInput("operations: required, at least one")
	}
	entries := make([]table.BatchVersion, len(*req.Operations))
	for i, op := range *req.Operations {
		field := fmt.Sprintf("operations[%d]", i)
		set := 0
		for _, ok := range []bool{op.CreateTableVersion != nil, op.DeclareTable != nil, op.DeleteTableVersions != nil, op.DeregisterTable != nil} {
			if ok {
				set++
			}
		}
		if set != 1 {
			return badInput("%s: exactly one of create_table_version, declare_table, delete_table_versions, deregister_table", field)
		}
		if op.CreateTableVersion == nil {
			bv, err := s.batchOther(c, field, op)
			if err != nil {
				return err
			}
			entries[i] = bv
			continue
		}
		cv := op.CreateTableVersion
		if cv.Identity != nil && string(cv.Identity) != "null" {
			return badInput("%s.create_table_version.identity: send credentials once, in the request's identity or its headers", field)
		}
		bv, err := s.batchVersion(c, field+".create_table_version", cv.versionEntry)
		if err != nil {
			return err
		}
		entries[i] = bv
	}
	id, res, err := s.cat.CommitBatch(c.Request.Context(), "batch-commit", entries)
	if err != nil {
		return txnErr(id, err)
	}
	results := make([]gin.H, len(res))
	for i, r := range res {
		switch r.Kind {
		case table.BatchDeclare:
			results[i] = gin.H{"declare_table": gin.H{"transaction_id": id, "location": r.Location}}
		case table.BatchDeleteVersions:
			results[i] = gin.H{"delete_table_versions": gin.H{"transaction_id": id, "deleted_count": r.Deleted}}
		case table.BatchDeregister:
			results[i] = gin.H{"deregister_table": gin.H{"transaction_id": id, "id": (*req.Operations)[i].DeregisterTable.ID}}
		default:
			results[i] = gin.H{"create_table_version": gin.H{"transaction_id": id, "version": batchVersions(res[i : i+1])[0]}}
		}
	}
	c.JSON(http.StatusOK, gin.H{"transaction_id": id, "results": results})
	return nil
}

// transaction reads the path's transaction (its id is one identifier
// part; a body id must agree) after decoding the body into req, and checks
// action on each of its tables.
func (s *Server) transaction(c *gin.Context, req any, bodyID func() []string, action auth.Action) (*table.Transaction, error) {
	id, err := pathAndBody(c, req, bodyID)
	if err != nil {
		return nil, err
	}
	if len(id) != 1 {
		return nil, badInput("id: a transaction id is one part, got %d", len(id))
	}
	tx, err := s.cat.Transaction(c.Request.Context(), id[0])
	if err == nil {
		for _, e := range tx.Entries {
			if err = allowTable(c, action, e.Table); err != nil {
				break
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return tx, nil
}

// txnProperties are what describe and alter show: the transaction's own
// properties and, under mvq., what the record says.
func txnProperties(tx *table.Transaction) map[string]string {
	out := map[string]string{}
	for k, v := range tx.Properties {
		out[k] = v
	}
	tables := make([]string, len(tx.Entries))
	for i, e := range tx.Entries {
		tables[i] = fmt.Sprintf("%s@%d", table.JoinID(e.Table), e.Version)
		if e.Branch != "" {
			tables[i] = fmt.Sprintf("%s@%s:%d", table.JoinID(e.Table), e.Branch, e.Version)
		}
	}
	out[table.TxnReservedPrefix+"operation"] = tx.Operation
	out[table.TxnReservedPrefix+"tables"] = strings.Join(tables, ",")
	out[table.TxnReservedPrefix+"created_at_millis"] = fmt.Sprint(tx.Created.UnixMilli())
	out[table.TxnReservedPrefix+"deadline_millis"] = fmt.Sprint(tx.Deadline.UnixMilli())
	if tx.Reason != "" {
		out[table.TxnReservedPrefix+"reason"] = tx.Reason
	}
	return out
}

func (s *Server) describeTransaction(c *gin.Context) error {
	var req struct {
		ID []string `json:"id"`
	}
	tx, err := s.transaction(c, &req, func() []string { return req.ID }, auth.Read)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"status": tx.Status, "properties": txnProperties(tx)})
	return nil
}

func (s *Server) alterTransaction(c *gin.Context) error {
	var req struct {
		ID      []string `json:"id"`
		Actions *[]struct {
			SetStatus *struct {
				Status *string `json:"status"`
			} `json:"setStatusAction"`
			SetProperty *struct {
				Key   *string `json:"key"`
				Value *string `json:"value"`
				Mode  *string `json:"mode"`
			} `json:"setPropertyAction"`
			UnsetProperty *struct {
				Key  *string `json:"key"`
				Mode *string `json:"mode"`
			} `json:"unsetPropertyAction"`
		} `json:"actions"`
	}
	tx, err := s.transaction(c, &req, func() []string { return req.ID }, auth.Write)
	if err != nil {
		return err
	}
	if req.Actions == nil || len(*req.Actions) == 0 {
		return badInput("actions: required, at least one")
	}
	mode := func(field string, m *string, def string, allowed ...string) (string, error) {
		if m == nil || *m == "" {
			return def, nil
		}
		v := strings.ToLower(strings.ReplaceAll(*m, "_", ""))
		for _, a := range allowed {
			if v == a {
				return v, nil
			}
		}
		return "", badInput("%s.mode: %q is not one of %s", field, *m, strings.Join(allowed, ", "))
	}
	key := func(field string, k *string) (string, error) {
		if k == nil || *k == "" {
			return "", badInput("%s.key: required", field)
		}
		if strings.HasPrefix(*k, table.TxnReservedPrefix) {
			return "", badInput("%s.key: %q: keys starting with %q are the server's", field, *k, table.TxnReservedPrefix)
		}
		return *k, nil
	}
	actions := make([]table.TxnAction, len(*req.Actions))
	for i, a := range *req.Actions {
		field := fmt.Sprintf("actions[%d]", i)
		n := 0
		for _, set := range []bool{a.SetStatus != nil, a.SetProperty != nil, a.UnsetProperty != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return badInput("%s: exactly one of setStatusAction, setPropertyAction, unsetPropertyAction", field)
		}
		var err error
		switch {
		case a.SetStatus != nil:
			field += ".setStatusAction"
			if a.SetStatus.Status == nil {
				err = badInput("%s.status: required", field)
				break
			}
			st, ok := table.ParseTxnStatus(*a.SetStatus.Status)
			if !ok {
				err = badInput("%s.status: %q is not Queued, Running, Succeeded, Failed or Canceled", field, *a.SetStatus.Status)
				break
			}
			actions[i] = table.TxnAction{Field: field, SetStatus: st}
		case a.SetProperty != nil:
			field += ".setPropertyAction"
			p := a.SetProperty
			var k, m string
			if k, err = key(field, p.Key); err != nil {
				break
			}
			if p.Value == nil {
				err = badInput("%s.value: required", field)
				break
			}
			if m, err = mode(field, p.Mode, "overwrite", "overwrite", "fail", "skip"); err != nil {
				break
			}
			actions[i] = table.TxnAction{Field: field, Key: k, Value: *p.Value, Mode: m}
		default:
			field += ".unsetPropertyAction"
			p := a.UnsetProperty
			var k, m string
			if k, err = key(field, p.Key); err != nil {
				break
			}
			if m, err = mode(field, p.Mode, "skip", "skip", "fail"); err != nil {
				break
			}
			actions[i] = table.TxnAction{Field: field, Key: k, Unset: true, Mode: m}
		}
		if err != nil {
			return err
		}
	}
	tx, err = s.cat.AlterTransaction(c.Request.Context(), tx.ID, actions)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"status": tx.Status, "properties": txnProperties(tx)})
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
