// Package icebergtest writes Apache Iceberg tables for tests the way
// another engine would: iceberg-go's Hadoop-style catalog over a temp
// folder (no catalog server), so each commit leaves a new metadata.json
// a test announces to mvq with a notification.
package icebergtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/hadoop"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// lakes
	icetable "github.com/apache/iceberg-go/table"
)

// Row is a row of the test table: id bigint, text string.
type Row struct {
	ID   int64
	Text string
}

// Lake is one Iceberg table, db.<name>, in a folder.
type Lake struct {
	t      testing.TB
	Dir    string
	cat    *hadoop.Catalog
	Table  *icetable.Table
	schema *arrow.Schema
}

// NewLake creates an empty Iceberg table named name in dir, a folder or
// an s3:// location (reached with the AWS_* environment; the Hadoop
// catalog's commits are not atomic there, which a test does not need)
// (format v2; mergeOnRead makes deletes write position delete files
// instead of rewriting data files).
func NewLake(t testing.TB, dir, name string, mergeOnRead bool) *Lake {
	t.Helper()
	ctx := context.Background()
	var catProps ice.Properties
	if strings.HasPrefix(dir, "s3://") {
		catProps = ice.Properties{"allow-unsafe-commits": "true"}
	}
	cat, err := hadoop.NewCatalog("lake", dir, catProps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	if err := cat.CreateNamespace(ctx, icetable.Identifier{"db"}, nil); err != nil && !isExists(err) {
		t.Fatal(err)
	}
	sc := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 2, Name: "text", Type: ice.PrimitiveTypes.String})
	props := ice.Properties{"format-version": "2"}
	if mergeOnRead {
		props["write.delete.mode"] = "merge-on-read"
	}
	tbl, err := cat.CreateTable(ctx, icetable.Identifier{"db", name}, sc, catalog.WithProperties(props))
	if err != nil {
		t.Fatal(err)
	}
	as, err := icetable.SchemaToArrowSchema(sc, nil, false, false)
	if err != nil {
		t.Fatal(err)
	}
	return &Lake{t: t, Dir: dir, cat: cat, Table: tbl, schema: as}
}

func isExists(err error) bool { return errors.Is(err, catalog.ErrNamespaceAlreadyExists) }

func (l *Lake) reader(rows []Row) array.RecordReader {
	b := array.NewRecordBuilder(memory.DefaultAllocator, l.schema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.ID)
		b.Field(1).(*array.StringBuilder).Append(r.Text)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(l.schema, []arrow.RecordBatch{rec})
	if err != nil {
		l.t.Fatal(err)
	}
	return rdr
}

// Append commits rows as a new data file.
func (l *Lake) Append(rows ...Row) {
	l.t.Helper()
	tbl, err := l.Table.Append(context.Background(), l.reader(rows), nil)
	if err != nil {
		l.t.Fatal(err)
	}
	l.Table = tbl
}

// Overwrite replaces the rows whose id is in ids with rows (copy on
// write: data files holding a matching row are rewritten).
func (l *Lake) Overwrite(ids []int64, rows ...Row) {
	l.t.Helper()
	tbl, err := l.Table.Overwrite(context.Background(), l.reader(rows), nil,
		icetable.WithOverwriteFilter(ice.IsIn(ice.Reference("id"), ids...)))
	if err != nil {
		l.t.Fatal(err)
	}
	l.Table = tbl
}

// Delete deletes the rows whose id is in ids.
func (l *Lake) Delete(ids ...int64) {
	l.t.Helper()
	tbl, err := l.Table.Delete(context.Background(), ice.IsIn(ice.Reference("id"), ids...), nil)
	if err != nil {
		l.t.Fatal(err)
	}
	l.Table = tbl
}

// MetadataLocation is the metadata.json of the latest commit.
func (l *Lake) MetadataLocation() string { return l.Table.MetadataLocation() }

// UUID is the table's uuid.
func (l *Lake) UUID() string { return l.Table.Metadata().TableUUID().String() }

// SnapshotID is the current snapshot's id (0 for none).
func (l *Lake) SnapshotID() int64 {
	if s := l.Table.CurrentSnapshot(); s != nil {
		return s.SnapshotID
	}
	return 0
}

// DeleteFiles counts the delete files of the current snapshot.
func (l *Lake) DeleteFiles() int {
	l.t.Helper()
	tasks, err := l.Table.Scan().PlanFiles(context.Background())
	if err != nil {
		l.t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, t := range tasks {
		for _, d := range slices.Concat(t.DeleteFiles, t.EqualityDeleteFiles, t.DeletionVectorFiles) {
			seen[d.FilePath()] = true
		}
	}
	return len(seen)
}

// Rows reads the current snapshot with iceberg-go's own scan (deletes
// applied): the oracle a test compares mvq with. Sorted by id.
func (l *Lake) Rows() []Row {
	l.t.Helper()
	_, it, err := l.Table.Scan().ToArrowRecords(context.Background())
	if err != nil {
		l.t.Fatal(err)
	}
	var out []Row
	for rec, err := range it {
		if err != nil {
			l.t.Fatal(err)
		}
		ids := rec.Column(0).(*array.Int64)
		texts := rec.Column(1).(*array.String)
		for i := 0; i < int(rec.NumRows()); i++ {
			out = append(out, Row{ids.Value(i), texts.Value(i)})
		}
		rec.Release()
	}
	slices.SortFunc(out, func(a, b Row) int { return int(a.ID - b.ID) })
	return out
}

// Notification is the body of a notification of type typ for the lake's
// latest commit at timestamp ts.
func (l *Lake) Notification(typ string, ts int64) []byte {
	return NotificationFor(typ, l.Table.Identifier()[len(l.Table.Identifier())-1], ts, l.UUID(), l.MetadataLocation())
}

// NotificationFor renders a notification body.
func NotificationFor(typ, name string, ts int64, uuid, loc string) []byte {
	b, err := json.Marshal(map[string]any{
		"notification-type": typ,
		"payload": map[string]any{
			"table-name": name, "timestamp": ts, "table-uuid": uuid, "metadata-location": loc,
		},
	})
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return b
}
