package dataset

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/mvq-dev/mvq/lance/pb/filepb"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
)

// MaxTransactionSize caps the transaction files this package reads.
const MaxTransactionSize = 256 << 20

// TransactionFileName is `{read_version}-{uuid}.txn`, the transaction's file
// name in `_transactions/`.
func TransactionFileName(t *tablepb.Transaction) string {
	return fmt.Sprintf("%d-%s.txn", t.GetReadVersion(), t.GetUuid())
}

// DecodeTransaction parses a transaction file (a bare Transaction protobuf).
func DecodeTransaction(b []byte) (*tablepb.Transaction, error) {
	if len(b) > MaxTransactionSize {
		return nil, corrupt("transaction of %d bytes is over the %d byte limit", len(b), MaxTransactionSize)
	}
	t := &tablepb.Transaction{}
	if err := proto.Unmarshal(b, t); err != nil {
		return nil, corrupt("transaction: %v", err)
	}
	return t, nil
}

// ReadTransactionFile reads `_transactions/{name}` of the dataset in dir.
func ReadTransactionFile(dir, name string) (*tablepb.Transaction, error) {
	if !localName(name, false) {
		return nil, corrupt("transaction file %q is not a plain file name", name)
	}
	p := filepath.Join(dir, TransactionsDir, name)
	b, err := readCapped(p, MaxTransactionSize)
	if err != nil {
		return nil, err
	}
	t, err := DecodeTransaction(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return t, nil
}

// WriteTransactionFile writes the transaction to `_transactions/` of the
// dataset in dir (never replacing a file) and returns its file name.
func WriteTransactionFile(dir string, t *tablepb.Transaction) (string, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(t)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(dir, TransactionsDir), 0o755); err != nil {
		return "", err
	}
	name := TransactionFileName(t)
	if err := createFile(filepath.Join(dir, TransactionsDir, name), b); err != nil {
		return "", err
	}
	return name, nil
}

// NewUUID returns a random (version 4) UUID in its text form, as LanceDB
// names transactions.
func NewUUID() string {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// The operations mvq commits. Each returns a Transaction for reading
// version readVersion (0 for a new dataset), with a fresh uuid.

func newTxn(readVersion uint64) *tablepb.Transaction {
	return &tablepb.Transaction{ReadVersion: readVersion, Uuid: NewUUID()}
}

// Append adds fragments (their ids are assigned at commit).
func Append(readVersion uint64, fragments []*tablepb.DataFragment) *tablepb.Transaction {
	t := newTxn(readVersion)
	t.Operation = &tablepb.Transaction_Append_{Append: &tablepb.Transaction_Append{Fragments: fragments}}
	return t
}

// Overwrite replaces the dataset's schema and fragments (or creates it, with
// readVersion 0). config is upserted into the table config.
func Overwrite(readVersion uint64, schema []*filepb.Field, schemaMetadata map[string][]byte, fragments []*tablepb.DataFragment, config map[string]string) *tablepb.Transaction {
	t := newTxn(readVersion)
	t.Operation = &tablepb.Transaction_Overwrite_{Overwrite: &tablepb.Transaction_Overwrite{
		Fragments: fragments, Schema: schema, SchemaMetadata: schemaMetadata, ConfigUpsertValues: config,
	}}
	return t
}

// Delete replaces fragments by id (typically with a new deletion file) and
// removes whole fragments; predicate is informational.
func Delete(readVersion uint64, updated []*tablepb.DataFragment, deletedIDs []uint64, predicate string) *tablepb.Transaction {
	t := newTxn(readVersion)
	t.Operation = &tablepb.Transaction_Delete_{Delete: &tablepb.Transaction_Delete{
		UpdatedFragments: updated, DeletedFragmentIds: deletedIDs, Predicate: predicate,
	}}
	return t
}

// Update removes fragments, replaces others by id and adds new ones (the
// rows rewritten); fieldsModified are the field ids whose values changed.
func Update(readVersion uint64, removedIDs []uint64, updated, added []*tablepb.DataFragment, fieldsModified []uint32) *tablepb.Transaction {
	t := newTxn(readVersion)
	t.Operation = &tablepb.Transaction_Update_{Update: &tablepb.Transaction_Update{
		RemovedFragmentIds: removedIDs, UpdatedFragments: updated, NewFragments: added, FieldsModified: fieldsModified,
	}}
	return t
}

// Merge replaces the schema and the whole fragment list (adding columns:
// each fragment gains a data file holding the new fields).
func Merge(readVersion uint64, schema []*filepb.Field, schemaMetadata map[string][]byte, fragments []*tablepb.DataFragment) *tablepb.Transaction {
	t := newTxn(readVersion)
	t.Operation = &tablepb.Transaction_Merge_{Merge: &tablepb.Transaction_Merge{
		Fragments: fragments, Schema: schema, SchemaMetadata: schemaMetadata,
	}}
	return t
}

// Project replaces the schema with a subset of its fields (dropping
// columns); data files left with no field of the schema leave the fragments.
func Project(readVersion uint64, schema []*filepb.Field) *tablepb.Transaction {
	t := newTxn(readVersion)
	t.Operation = &tablepb.Transaction_Project_{Project: &tablepb.Transaction_Project{Schema: schema}}
	return t
}

// MapUpdate is a change to a string map (table config, table metadata):
// keys set to a value, keys with a nil value removed; Replace drops every
// other key first.
type MapUpdate struct {
	Set     map[string]*string
	Replace bool
}

func (u *MapUpdate) proto() *tablepb.Transaction_UpdateMap {
	if u == nil {
		return nil
	}
	m := &tablepb.Transaction_UpdateMap{Replace: u.Replace}
	keys := make([]string, 0, len(u.Set))
	for k := range u.Set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		m.UpdateEntries = append(m.UpdateEntries, &tablepb.Transaction_UpdateMapEntry{Key: k, Value: u.Set[k]})
	}
	return m
}

// UpdateConfig changes the table config and the table metadata (nil: left
// as they are).
func UpdateConfig(readVersion uint64, config, tableMetadata *MapUpdate) *tablepb.Transaction {
	t := newTxn(readVersion)
	t.Operation = &tablepb.Transaction_UpdateConfig_{UpdateConfig: &tablepb.Transaction_UpdateConfig{
		ConfigUpdates: config.proto(), TableMetadataUpdates: tableMetadata.proto(),
	}}
	return t
}

// applyMapUpdate applies an UpdateMap to a copy of m.
func applyMapUpdate(m map[string]string, u *tablepb.Transaction_UpdateMap) map[string]string {
	if u == nil {
		return m
	}
	out := map[string]string{}
	if !u.GetReplace() {
		for k, v := range m {
			out[k] = v
		}
	}
	for _, e := range u.GetUpdateEntries() {
		if e.Value == nil {
			delete(out, e.GetKey())
		} else {
			out[e.GetKey()] = e.GetValue()
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// OperationName names a transaction's operation ("append", "delete", ...).
func OperationName(t *tablepb.Transaction) string {
	switch t.GetOperation().(type) {
	case *tablepb.Transaction_Append_:
		return "append"
	case *tablepb.Transaction_Delete_:
		return "delete"
	case *tablepb.Transaction_Overwrite_:
		return "overwrite"
	case *tablepb.Transaction_CreateIndex_:
		return "create_index"
	case *tablepb.Transaction_Rewrite_:
		return "rewrite"
	case *tablepb.Transaction_Merge_:
		return "merge"
	case *tablepb.Transaction_Restore_:
		return "restore"
	case *tablepb.Transaction_ReserveFragments_:
		return "reserve_fragments"
	case *tablepb.Transaction_Update_:
		return "update"
	case *tablepb.Transaction_Project_:
		return "project"
	case *tablepb.Transaction_UpdateConfig_:
		return "update_config"
	case *tablepb.Transaction_DataReplacement_:
		return "data_replacement"
	case *tablepb.Transaction_UpdateMemWalState_:
		return "update_mem_wal_state"
	case *tablepb.Transaction_Clone_:
		return "clone"
	case *tablepb.Transaction_UpdateBases_:
		return "update_bases"
	case nil:
		return "none"
	}
	return "unknown"
}
