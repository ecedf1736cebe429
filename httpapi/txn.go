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
	"github.com/mvq-dev/mvq/table"
)

// Multi-table atomicity: version/batch-create, batch-commit and the
// transaction describe/alter (routes added by txnRoutes; the protocol is
// table/txn.go). Their routes' rule is targetTables: the handlers check
// the grant on every table involved.

func (s *Server) txnRoutes(v1 gin.IRouter) {
	v1.POST("/table/version/batch-create", s.batchCreateVersions)
	v1.POST("/table/batch-commit", s.batchCommitTables)
	v1.POST("/transaction/:id/describe", s.describeTransaction)
	v1.POST("/transaction/:id/alter", s.alterTransaction)
}

// allowTable checks the request's identity for action on a table (nil
// without authentication, MVQ_AUTH=none).
func allowTable(c *gin.Context, action auth.Action, id []string) error {
	v, ok := c.Get(identityKey)
	if !ok {
		return nil
	}
	who, _ := v.(*auth.Identity)
	if who == nil || who.Allows(action, id) {
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
// identity's write grant on its table.
func batchVersion(c *gin.Context, field string, e versionEntry) (table.BatchVersion, error) {
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
	if e.Branch != nil && *e.Branch != "" && *e.Branch != "main" {
		return table.BatchVersion{}, badInput("%s.branch: a batch commits to the main branch only", field)
	}
	if e.ETag != nil && *e.ETag != "" {
		return table.BatchVersion{}, badInput("%s.e_tag: not supported (the staged manifest is checked by content and manifest_size)", field)
	}
	scheme := table.NamingV2
	if e.NamingScheme != nil && *e.NamingScheme != "" {
		scheme = table.NamingScheme(strings.ToUpper(*e.NamingScheme))
	}
	if err := allowTable(c, auth.Write, e.ID); err != nil {
		return table.BatchVersion{}, err
	}
	return table.BatchVersion{
		Field: field, ID: e.ID, Version: uint64(*e.Version), ManifestPath: *e.ManifestPath,
		ManifestSize: e.ManifestSize, Scheme: scheme, Metadata: e.Metadata,
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

// txnFail answers err, naming the transaction when one was recorded.
func txnFail(c *gin.Context, txnID string, err error) {
	if txnID != "" && !strings.Contains(err.Error(), txnID) {
		err = fmt.Errorf("transaction %s: %w", txnID, err)
	}
	fail(c, err)
}

func (s *Server) batchCreateVersions(c *gin.Context) {
	var req struct {
		Entries *[]versionEntry `json:"entries"`
	}
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	if req.Entries == nil || len(*req.Entries) == 0 {
		fail(c, badInput("entries: required, at least one"))
		return
	}
	entries := make([]table.BatchVersion, len(*req.Entries))
	for i, e := range *req.Entries {
		bv, err := batchVersion(c, fmt.Sprintf("entries[%d]", i), e)
		if err != nil {
			fail(c, err)
			return
		}
		entries[i] = bv
	}
	id, res, err := s.cat.CommitBatch(c, "batch-create", entries)
	if err != nil {
		txnFail(c, id, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"transaction_id": id, "versions": batchVersions(res)})
}

// commitOperation is the spec's CommitTableOperation.
type commitOperation struct {
	CreateTableVersion *struct {
		versionEntry
		Identity json.RawMessage   `json:"identity"`
		Context  map[string]string `json:"context"`
	} `json:"create_table_version"`
	DeclareTable        json.RawMessage `json:"declare_table"`
	DeleteTableVersions json.RawMessage `json:"delete_table_versions"`
	DeregisterTable     json.RawMessage `json:"deregister_table"`
}

func (s *Server) batchCommitTables(c *gin.Context) {
	var req struct {
		Operations *[]commitOperation `json:"operations"`
	}
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	if req.Operations == nil || len(*req.Operations) == 0 {
		fail(c, badInput("operations: required, at least one"))
		return
	}
	entries := make([]table.BatchVersion, len(*req.Operations))
	for i, op := range *req.Operations {
		field := fmt.Sprintf("operations[%d]", i)
		set := 0
		for _, raw := range []json.RawMessage{op.DeclareTable, op.DeleteTableVersions, op.DeregisterTable} {
			if raw != nil && string(raw) != "null" {
				set++
			}
		}
		if op.CreateTableVersion != nil {
			set++
		}
		if set != 1 {
			fail(c, badInput("%s: exactly one of create_table_version, declare_table, delete_table_versions, deregister_table", field))
			return
		}
		switch {
		case op.DeclareTable != nil && string(op.DeclareTable) != "null":
			fail(c, badInput("%s.declare_table: not supported in a batch here: only create_table_version operations commit atomically (declare with /v1/table/{id}/declare)", field))
			return
		case op.DeleteTableVersions != nil && string(op.DeleteTableVersions) != "null":
			fail(c, badInput("%s.delete_table_versions: not supported in a batch here: only create_table_version operations commit atomically (use /v1/table/{id}/version/delete)", field))
			return
		case op.DeregisterTable != nil && string(op.DeregisterTable) != "null":
			fail(c, badInput("%s.deregister_table: not supported in a batch here: only create_table_version operations commit atomically (use /v1/table/{id}/deregister)", field))
			return
		}
		cv := op.CreateTableVersion
		if cv.Identity != nil && string(cv.Identity) != "null" {
			fail(c, badInput("%s.create_table_version.identity: send credentials once, in the request's identity or its headers", field))
			return
		}
		bv, err := batchVersion(c, field+".create_table_version", cv.versionEntry)
		if err != nil {
			fail(c, err)
			return
		}
		entries[i] = bv
	}
	id, res, err := s.cat.CommitBatch(c, "batch-commit", entries)
	if err != nil {
		txnFail(c, id, err)
		return
	}
	vs := batchVersions(res)
	results := make([]gin.H, len(vs))
	for i, v := range vs {
		results[i] = gin.H{"create_table_version": gin.H{"transaction_id": id, "version": v}}
	}
	c.JSON(http.StatusOK, gin.H{"transaction_id": id, "results": results})
}

// transaction reads the path's transaction (its id is one identifier
// part; a body id must agree) after decoding the body into req, and checks
// action on each of its tables.
func (s *Server) transaction(c *gin.Context, req any, bodyID func() []string, action auth.Action) (*table.Transaction, bool) {
	id, ok := pathAndBody(c, req, bodyID)
	if !ok {
		return nil, false
	}
	if len(id) != 1 {
		fail(c, badInput("id: a transaction id is one part, got %d", len(id)))
		return nil, false
	}
	tx, err := s.cat.Transaction(c, id[0])
	if err == nil {
		for _, e := range tx.Entries {
			if err = allowTable(c, action, e.Table); err != nil {
				break
			}
		}
	}
	if err != nil {
		fail(c, err)
		return nil, false
	}
	return tx, true
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

func (s *Server) describeTransaction(c *gin.Context) {
	var req struct {
		ID []string `json:"id"`
	}
	tx, ok := s.transaction(c, &req, func() []string { return req.ID }, auth.Read)
	if !ok {
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": tx.Status, "properties": txnProperties(tx)})
}

func (s *Server) alterTransaction(c *gin.Context) {
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
	tx, ok := s.transaction(c, &req, func() []string { return req.ID }, auth.Write)
	if !ok {
		return
	}
	if req.Actions == nil || len(*req.Actions) == 0 {
		fail(c, badInput("actions: required, at least one"))
		return
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
			fail(c, badInput("%s: exactly one of setStatusAction, setPropertyAction, unsetPropertyAction", field))
			return
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
			fail(c, err)
			return
		}
	}
	tx, err := s.cat.AlterTransaction(c, tx.ID, actions)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": tx.Status, "properties": txnProperties(tx)})
}
