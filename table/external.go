package table

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/mvq-dev/mvq/errs"
)

// ExternalProperty is the manifest property that makes a table external:
// its content mirrors a table another engine writes (an Apache Iceberg
// table announced by catalog notifications, package iceberg), and only
// the code that mirrors it commits versions (CommitExternal,
// CreateExternal). The value is that code's own state; this package does
// not read it. Every other write (insert, delete, update, overwrite,
// restore, version create, add columns, compaction) is refused.
const ExternalProperty = "mvq.external"

// OperationNotification is the operation of a version an external
// table's catalog notification committed. The commit hook tells it apart
// to give the automatic refreshes it causes their cause.
const OperationNotification = "notification"

// MetaExternalRecomputed is the version metadata of an external table's
// version that counts the data files it read again because delete files
// came to touch them (refresh reports the sum in a job's result).
const MetaExternalRecomputed = "iceberg.recomputed_data_files"

// IsExternal reports whether the version belongs to an external table.
func (m *Manifest) IsExternal() bool { _, ok := m.Properties[ExternalProperty]; return ok }

// refuseExternal is the error for a direct write to an external table.
func refuseExternal(id []string, op string) error {
	return errs.Errorf(errs.CodeInvalidInput, "%s is an external table: %s is not allowed; it changes only through catalog notifications of the engine that writes it", JoinID(id), op)
}

type externalWriteKey struct{}

// externalWrite reports whether ctx carries CommitExternal's permission.
func externalWrite(ctx context.Context) bool { return ctx.Value(externalWriteKey{}) != nil }

// CommitExternal commits op on an external table (or makes a table
// external): the one way to change one. op runs as for Commit (again
// on a newer base after a lost race); it must keep ExternalProperty.
func (t *Table) CommitExternal(ctx context.Context, op Op) (*Manifest, error) {
	return t.Commit(context.WithValue(ctx, externalWriteKey{}, true), func(base *Manifest) (*Manifest, error) {
		next, err := op(base)
		if err == nil && next != nil && !next.IsExternal() {
			return nil, errs.Errorf(errs.CodeInternal, "external commit of %s dropped %s", JoinID(t.id), ExternalProperty)
		}
		return next, err
	})
}

// CreateExternal creates an external table at version 1 holding frags
// (data files already written under the table's data/ folder, IDs
// unassigned: they are given in order from 0) with schema, the
// properties props (which must hold ExternalProperty) and the version
// metadata meta. A table of that name that already exists is
// errs.CodeTableAlreadyExists, and nothing is changed.
func (c *Catalog) CreateExternal(ctx context.Context, id []string, schema *arrow.Schema, frags []Fragment, props map[string]json.RawMessage, meta map[string]string) (*Table, *Manifest, error) {
	if len(id) == 0 {
		return nil, nil, errs.Errorf(errs.CodeInvalidInput, "a table identifier needs a name")
	}
	if _, ok := props[ExternalProperty]; !ok {
		return nil, nil, errs.Errorf(errs.CodeInternal, "CreateExternal without %s", ExternalProperty)
	}
	if err := c.requireNamespace(ctx, id[:len(id)-1]); err != nil {
		return nil, nil, err
	}
	if err := checkSchema(schema); err != nil {
		return nil, nil, err
	}
	enc, err := encodeSchema(schema)
	if err != nil {
		return nil, nil, err
	}
	t := c.handle(id)
	m := &Manifest{Version: 1, UUID: newIdentity(), TimestampMillis: time.Now().UnixMilli(), Operation: OperationNotification, Schema: enc,
		lance: c.opts.Format == FormatLance}
	m.Properties = rawProps(props)
	m.Metadata = meta
	assignIDs(m, frags)
	data, err := m.Encode()
	if err != nil {
		return nil, nil, err
	}
	err = c.wh.PutIfNotExists(ctx, t.key+versionsDir+ManifestName(1, NamingV2), data)
	if errors.Is(err, ErrExists) {
		return nil, nil, errs.Errorf(errs.CodeTableAlreadyExists, "table %s already exists", JoinID(id))
	}
	if err != nil {
		return nil, nil, err
	}
	c.committed(ctx, id, m)
	return t, m, nil
}

// TableKey is the warehouse key of table id's folder (ending in "/").
func TableKey(id []string) string { return tableKey(id) }

// NamespaceKey is the warehouse key of namespace ns's folder ("" for the
// root, else ending in "/"). Names under it that start with "_" are no
// namespace or table (ValidatePart refuses them), so code that keeps
// state beside a namespace's tables uses such names.
func NamespaceKey(ns []string) string { return namespaceKey(ns) }

// Handle returns a handle on table id whether or not it exists, to write
// the data files of its first version (CreateExternal) before it does.
func (c *Catalog) Handle(id []string) *Table { return c.handle(id) }

// CheckSchema refuses schemas a table cannot hold (no fields, duplicate
// or reserved names, types tables do not store), as table create does.
func CheckSchema(s *arrow.Schema) error { return checkSchema(s) }
