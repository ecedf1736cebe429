package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// A notification whose snapshot is the one the latest version mirrors
// already (an engine announcing a commit that changed only properties, or
// a notification sent twice with a new timestamp) commits no version, so
// views over the table are not refreshed for nothing. Its timestamp is
// still admitted: it is recorded beside the namespace's tables, under the
// version it was admitted against, as the n-th such record
// (put-if-not-exists, so of concurrent ones each gets its own n), and
// every later notification is admitted against the newest of the
// version's own timestamp and these records.
//
// A record and the next version are two objects, so an UPDATE may commit
// version v+1 having read the records of v just before a newer
// notification recorded its timestamp under v. The no-change notification
// therefore reads the latest version again after recording: if it moved,
// it is admitted again against the new version (and refused, when that
// version's timestamp is newer, or else mirrored onto it), so the newest
// timestamp admitted always describes the table's state.

// errUnchanged ends a commit whose base mirrors the notification's
// snapshot already (a concurrent one committed it): admit it as unchanged.
var errUnchanged = errors.New("the snapshot is mirrored already")

// admittedKey is the record n of table id's version of identity uuid.
func admittedKey(id []string, uuid string, version uint64, n int) string {
	if uuid == "" {
		uuid = "none"
	}
	return table.NamespaceKey(id[:len(id)-1]) + "_iceberg_admitted/" + id[len(id)-1] + "/" + uuid + "/" + strconv.FormatUint(version, 10) + "/" + fmt.Sprintf("%08d", n) + ".json"
}

type admittedRecord struct {
	Timestamp        int64  `json:"notification_timestamp"`
	MetadataLocation string `json:"metadata_location"`
}

// admittedSince is the newest timestamp recorded under version m (0 for
// none) and the number of the next record.
func (r *Registrar) admittedSince(ctx context.Context, id []string, m *table.Manifest) (int64, int, error) {
	var newest int64
	for n := 1; ; n++ {
		raw, err := r.cat.Warehouse().Read(ctx, admittedKey(id, m.UUID, m.Version, n))
		if errors.Is(err, fs.ErrNotExist) {
			return newest, n, nil
		}
		if err != nil {
			return 0, 0, err
		}
		var rec admittedRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return 0, 0, &errs.Error{Code: errs.CodeInvalidTableState, Message: "admitted notification record is corrupt", Err: err}
		}
		newest = max(newest, rec.Timestamp)
	}
}

// withAdmitted is old with Timestamp raised to the newest recorded under
// version m.
func (r *Registrar) withAdmitted(ctx context.Context, id []string, m *table.Manifest, old State) (State, error) {
	ts, _, err := r.admittedSince(ctx, id, m)
	if err != nil {
		return old, err
	}
	old.Timestamp = max(old.Timestamp, ts)
	return old, nil
}

// unchanged reports whether snap is what version m mirrors already.
func unchanged(m *table.Manifest, st State, snap *snapshot, enc string) bool {
	if m == nil || m.Schema != enc {
		return false
	}
	if st.SnapshotID == nil || snap.id == nil {
		return st.SnapshotID == nil && snap.id == nil
	}
	return *st.SnapshotID == *snap.id
}

// admitUnchanged records p's timestamp under version m. moved is true
// when a record of that number exists already or m is no longer the
// latest version: the caller admits p again from the start.
func (r *Registrar) admitUnchanged(ctx context.Context, id []string, m *table.Manifest, st State, p Payload) (moved bool, err error) {
	newest, n, err := r.admittedSince(ctx, id, m)
	if err != nil {
		return false, err
	}
	if *p.Timestamp <= max(newest, st.Timestamp) {
		return false, errs.Errorf(errs.CodeTableAlreadyExists, "a notification with a newer timestamp has been admitted for table %s: timestamp %d is not after %d", p.TableName, *p.Timestamp, max(newest, st.Timestamp))
	}
	doc, _ := json.Marshal(admittedRecord{Timestamp: *p.Timestamp, MetadataLocation: p.MetadataLocation})
	err = r.cat.Warehouse().PutIfNotExists(ctx, admittedKey(id, m.UUID, m.Version, n), doc)
	if errors.Is(err, table.ErrExists) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	t, err := r.cat.OpenTable(ctx, id)
	if err != nil {
		return false, err
	}
	latest, err := t.Load(ctx, 0)
	if errs.CodeOf(err) == errs.CodeTableNotFound {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return latest.Version != m.Version || latest.UUID != m.UUID, nil
}
