// Package iceberg mirrors Apache Iceberg tables that other engines write
// into the mvq catalog as external tables, driven by the Apache Polaris
// notification API (CREATE, UPDATE, DROP, VALIDATE).
//
// An external table is an mvq table whose manifest holds
// table.ExternalProperty (State): each admitted CREATE/UPDATE reads the
// Iceberg metadata at the notification's metadata-location, plans the
// current snapshot (github.com/apache/iceberg-go), and commits one mvq
// version whose fragments hold the snapshot's data files, one fragment
// per data file, with its delete files applied. A data file already
// mirrored with the same deletes keeps its fragment, so everything that
// diffs fragments (incremental view refresh above all) sees added data
// files as added fragments and removed ones as removed fragments; a data
// file whose deletes changed is read again into a new fragment whose rows
// keep their ids (table.RowIDsProperty: the origin fragment and the
// deleted positions), so views keep the rows of its surviving rows and
// remove only the deleted ones. A notification of the snapshot mirrored
// already commits nothing (admitted.go). Rows are
// copied, not referenced in place: the table reads only its own folder,
// and it keeps working after the engine expires the snapshot's files.
//
// Every file is read through a file system that refuses names outside
// the locations the table's namespace may read (MVQ_ALLOWED_LOCATIONS,
// global or per namespace): metadata, manifest lists, manifests, data and
// delete files; a local file is opened so that no symbolic link leads out
// of them, and no error shows what a file holds.
package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// Notification types (the spec's NotificationType).
const (
	TypeCreate   = "CREATE"
	TypeUpdate   = "UPDATE"
	TypeDrop     = "DROP"
	TypeValidate = "VALIDATE"
)

// Request is the spec's NotificationRequest.
type Request struct {
	Type    string   `json:"notification-type"`
	Payload *Payload `json:"payload"`
}

// Payload is the spec's TableUpdateNotification. Metadata, when given, is
// the table metadata itself: it is used instead of reading the file at
// MetadataLocation (whose location is still checked and recorded).
type Payload struct {
	TableName        string          `json:"table-name"`
	Timestamp        *int64          `json:"timestamp"`
	TableUUID        string          `json:"table-uuid"`
	MetadataLocation string          `json:"metadata-location"`
	Metadata         json.RawMessage `json:"metadata,omitempty"`
}

type iceioIO = iceio.IO

// Registrar applies notifications to a catalog.
type Registrar struct {
	cat     *table.Catalog
	allowed Allowed
	props   map[string]string
}

// NewRegistrar returns a registrar over cat that reads Iceberg tables only
// within allowed (per namespace).
func NewRegistrar(cat *table.Catalog, allowed Allowed) *Registrar {
	return &Registrar{cat: cat, allowed: allowed, props: map[string]string{}}
}

// fs is the guarded file system for files of the table at loc, in
// namespace ns.
func (r *Registrar) fs(ctx context.Context, ns []string, loc string) (iceioIO, error) {
	inner, err := iceio.LoadFS(ctx, r.props, loc)
	if err != nil {
		return nil, errs.Errorf(errs.CodeInvalidInput, "payload.metadata-location: %v", err)
	}
	return guardFS{inner: inner, allowed: r.allowed, ns: ns}, nil
}

// check validates what every notification needs: a known type, a payload
// with its required fields, a table-name equal to the path's, the
// namespace, and a location inside the allowed ones.
func (r *Registrar) check(ctx context.Context, id []string, req Request) error {
	switch req.Type {
	case TypeCreate, TypeUpdate, TypeDrop, TypeValidate:
	case "":
		return errs.Errorf(errs.CodeInvalidInput, "notification-type: required")
	default:
		return errs.Errorf(errs.CodeInvalidInput, "notification-type: %q is not one of CREATE, UPDATE, DROP, VALIDATE", req.Type)
	}
	p := req.Payload
	switch {
	case p == nil:
		return errs.Errorf(errs.CodeInvalidInput, "payload: required")
	case p.TableName == "":
		return errs.Errorf(errs.CodeInvalidInput, "payload.table-name: required")
	case p.TableName != id[len(id)-1]:
		return errs.Errorf(errs.CodeInvalidInput, "payload.table-name: %q is not %q, the table of the path", p.TableName, id[len(id)-1])
	case p.Timestamp == nil:
		return errs.Errorf(errs.CodeInvalidInput, "payload.timestamp: required")
	case p.TableUUID == "":
		return errs.Errorf(errs.CodeInvalidInput, "payload.table-uuid: required")
	case p.MetadataLocation == "":
		return errs.Errorf(errs.CodeInvalidInput, "payload.metadata-location: required")
	}
	ok, err := r.cat.NamespaceExists(ctx, id[:len(id)-1])
	if err != nil {
		return err
	}
	if !ok {
		return errs.Errorf(errs.CodeNamespaceNotFound, "namespace %s not found", table.JoinID(id[:len(id)-1]))
	}
	return r.allowed.Check(id[:len(id)-1], "payload.metadata-location", p.MetadataLocation)
}

// registered returns the table id and its state: nil table when there is
// none; a table that is not external is CodeTableAlreadyExists.
func (r *Registrar) registered(ctx context.Context, id []string) (*table.Table, *table.Manifest, State, error) {
	t, err := r.cat.OpenTable(ctx, id)
	if errs.CodeOf(err) == errs.CodeTableNotFound {
		return nil, nil, State{}, nil
	}
	if err != nil {
		return nil, nil, State{}, err
	}
	m, err := t.Load(ctx, 0)
	if errs.CodeOf(err) == errs.CodeTableNotFound {
		return nil, nil, State{}, nil
	}
	if err != nil {
		return nil, nil, State{}, err
	}
	st, ext, err := stateOf(m)
	if err != nil {
		return nil, nil, State{}, err
	}
	if !ext {
		return nil, nil, State{}, errs.Errorf(errs.CodeTableAlreadyExists, "%s is an mvq table, not an external one: notifications cannot change it", table.JoinID(id))
	}
	return t, m, st, nil
}

// Notify applies one notification to table id (namespace parts, then the
// table name). Errors are coded: CodeInvalidInput (malformed, unreadable
// metadata), CodeSchemaValidation (a column mvq cannot store),
// CodePermissionDenied (a location outside the allowed ones),
// CodeNamespaceNotFound, CodeTableNotFound (UPDATE or DROP of a table not
// registered), CodeTableAlreadyExists (a timestamp not after the newest
// processed, or a name taken by a table that is not external: nothing
// changed) and CodeConcurrentModification (table-uuid differs from the
// registered table's).
func (r *Registrar) Notify(ctx context.Context, id []string, req Request) error {
	if len(id) < 2 {
		return errs.Errorf(errs.CodeInvalidInput, "namespace: required")
	}
	if err := r.check(ctx, id, req); err != nil {
		return err
	}
	p := *req.Payload
	switch req.Type {
	case TypeValidate:
		_, _, st, err := r.registered(ctx, id)
		if err != nil {
			return err
		}
		if st.TableUUID != "" && st.TableUUID != p.TableUUID {
			return errs.Errorf(errs.CodeConcurrentModification, "table-uuid %s differs from %s, the uuid of the registered table", p.TableUUID, st.TableUUID)
		}
		return nil
	case TypeDrop:
		return r.drop(ctx, id, p)
	}
	return r.upsert(ctx, id, req.Type, p)
}

// upsert registers or advances the external table. The data files of the
// snapshot are materialized before the commit; the commit (a put-if-not-
// exists of the next version) checks the uuid and the timestamp against
// the latest version, so of concurrent notifications for one table
// exactly the newest-timestamped ones in commit order are admitted and
// each older one is a CodeTableAlreadyExists that changed nothing.
func (r *Registrar) upsert(ctx context.Context, id []string, typ string, p Payload) error {
	for attempt := 0; ; attempt++ {
		t, m, st, err := r.registered(ctx, id)
		if err != nil {
			return err
		}
		if t == nil && typ == TypeUpdate {
			return errs.Errorf(errs.CodeTableNotFound, "table %s is not registered: send CREATE first", table.JoinID(id))
		}
		if t == nil {
			if err := r.checkTombstone(ctx, id, p); err != nil {
				return err
			}
		} else {
			if st, err = r.withAdmitted(ctx, id, m, st); err != nil {
				return err
			}
			if err := admit(m, st, p, p.TableUUID); err != nil {
				return err // early: nothing read
			}
		}
		snap, err := r.load(ctx, id, p.MetadataLocation, p.Metadata)
		if err != nil {
			return err
		}
		if uuid := snap.tbl.Metadata().TableUUID().String(); uuid != p.TableUUID {
			return errs.Errorf(errs.CodeInvalidInput, "payload.table-uuid: %s is not %s, the uuid in the metadata at %s", p.TableUUID, uuid, p.MetadataLocation)
		}
		enc, err := table.EncodeSchema(snap.schema)
		if err != nil {
			return err
		}
		if t != nil && unchanged(m, st, snap, enc) {
			// The snapshot mirrored already: admit the timestamp, commit
			// nothing (admitted.go).
			moved, err := r.admitUnchanged(ctx, id, m, st, p)
			if err != nil || !moved {
				return err
			}
			if attempt < 100 { // each lost race is another notification admitted
				continue
			}
			return errs.Errorf(errs.CodeConcurrentModification, "table %s kept changing while the notification was admitted; send it again", table.JoinID(id))
		}
		handle := r.cat.Handle(id)
		// Materialize the data files the latest version does not hold
		// with the same deletes and schema.
		have := map[string]bool{}
		if m != nil && m.Schema == enc {
			for _, f := range st.Files {
				have[f.key()] = true
			}
		}
		written := map[string]*written{}
		for _, pf := range snap.files {
			k := pf.ref.key()
			if have[k] {
				continue
			}
			f, err := snap.materialize(ctx, handle, pf)
			if err != nil {
				return err
			}
			written[k] = f
		}
		if t == nil {
			op, stats := mirrorOp(p, p.TableUUID, snap, written, enc)
			base := &table.Manifest{Schema: enc, Properties: map[string]json.RawMessage{}}
			next, err := op(base)
			if err != nil {
				return err
			}
			_, _, err = r.cat.CreateExternal(ctx, id, snap.schema, next.Fragments, next.Properties, stats.metadata(p, snap))
			if errs.CodeOf(err) == errs.CodeTableAlreadyExists && attempt < 3 {
				continue // a concurrent CREATE won: admit against it
			}
			return err
		}
		op, _ := mirrorOp(p, p.TableUUID, snap, written, enc)
		_, err = t.CommitExternal(ctx, func(base *table.Manifest) (*table.Manifest, error) {
			// Timestamps admitted without a version count too.
			old, _, err := stateOf(base)
			if err != nil {
				return nil, err
			}
			if old, err = r.withAdmitted(ctx, id, base, old); err != nil {
				return nil, err
			}
			if err := admit(base, old, p, p.TableUUID); err != nil {
				return nil, err
			}
			if unchanged(base, old, snap, enc) {
				return nil, errUnchanged // a concurrent notification mirrored it
			}
			return op(base)
		})
		if (errors.Is(err, errStale) || errors.Is(err, errUnchanged)) && attempt < 5 {
			continue
		}
		return err
	}
}

// tombstone is what a DROP leaves beside the namespace's tables: the
// timestamp it was processed at, so a CREATE replayed from before the
// drop is refused as out of order.
func tombstoneKey(id []string) string {
	return table.NamespaceKey(id[:len(id)-1]) + "_iceberg_dropped/" + id[len(id)-1] + ".json"
}

type tombstone struct {
	Timestamp int64  `json:"notification_timestamp"`
	TableUUID string `json:"table_uuid"`
}

func (r *Registrar) checkTombstone(ctx context.Context, id []string, p Payload) error {
	raw, err := r.cat.Warehouse().Read(ctx, tombstoneKey(id))
	if err != nil {
		return nil // none (or unreadable: it only guards replays)
	}
	var ts tombstone
	if json.Unmarshal(raw, &ts) != nil {
		return nil
	}
	if *p.Timestamp <= ts.Timestamp {
		return errs.Errorf(errs.CodeTableAlreadyExists, "a notification with a newer timestamp has been admitted for table %s: it was dropped at timestamp %d, %d is not after it", p.TableName, ts.Timestamp, *p.Timestamp)
	}
	return nil
}

// drop unregisters the external table. Views reading it stay; their next
// refresh fails naming the table.
func (r *Registrar) drop(ctx context.Context, id []string, p Payload) error {
	t, m, st, err := r.registered(ctx, id)
	if err != nil {
		return err
	}
	if t == nil {
		return errs.Errorf(errs.CodeTableNotFound, "table %s is not registered", table.JoinID(id))
	}
	if st, err = r.withAdmitted(ctx, id, m, st); err != nil {
		return err
	}
	if err := admit(m, st, p, p.TableUUID); err != nil {
		return err
	}
	doc, _ := json.Marshal(tombstone{Timestamp: *p.Timestamp, TableUUID: p.TableUUID})
	if err := r.cat.Warehouse().Write(ctx, tombstoneKey(id), doc); err != nil {
		return err
	}
	// A version committed since the check (a newer UPDATE) is dropped
	// too: the engine announced the drop after it, by the caller's clock.
	if err := r.cat.DropTable(ctx, id); err != nil && errs.CodeOf(err) != errs.CodeTableNotFound {
		return err
	}
	return nil
}

// SnapshotOf returns the Iceberg snapshot id a version of an external
// table mirrors (from its metadata), if any.
func SnapshotOf(m *table.Manifest) (int64, bool) {
	s, ok := m.Metadata[MetaSnapshotID]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
