package index

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// Spec is what to build.
type Spec struct {
	Name   string // "": <column>_idx
	Column string
	Type   string // BTREE, BITMAP, IVF_FLAT, INVERTED (FTS is INVERTED)
	// Vector indexes.
	Metric        string // l2 (default), cosine, dot
	Partitions    int    // 0: about sqrt(rows), at most 4096
	MaxIterations int    // k-means iterations, 0: 25
	SampleRate    int    // training rows per partition, 0: 256
	// IVF_PQ: sub-vectors per code (0: dim/4 where 4 divides dim) and
	// bits per sub-vector code (0: 8; 1 to 8).
	SubVectors int
	Bits       int
	// INVERTED: NoPositions leaves token positions out of the index
	// (with_position false); phrase queries then tokenize the fragment.
	NoPositions bool
}

// ScalarTypes and VectorTypes are the types create answers for.
var (
	ScalarTypes = []string{BTree, Bitmap, Inverted}
	VectorTypes = []string{IVFFlat, IVFPQ}
)

// normalize checks spec against the schema and fills defaults; it
// answers the column's field index.
func (s *Spec) normalize(schema *arrow.Schema) (int, error) {
	s.Type = strings.ToUpper(strings.TrimSpace(s.Type))
	if s.Type == "FTS" {
		s.Type = Inverted
	}
	if s.Column == "" {
		return 0, errs.Errorf(errs.CodeInvalidInput, "column: required")
	}
	idx := schema.FieldIndices(s.Column)
	if len(idx) == 0 {
		return 0, errs.Errorf(errs.CodeTableColumnNotFound, "column: %q not found", s.Column)
	}
	f := schema.Field(idx[0])
	if s.Name == "" {
		s.Name = s.Column + "_idx"
	}
	if err := checkName(s.Name); err != nil {
		return 0, err
	}
	vectorOnly := func() error {
		for name, set := range map[string]bool{"distance_type": s.Metric != "", "num_partitions": s.Partitions != 0,
			"max_iterations": s.MaxIterations != 0, "sample_rate": s.SampleRate != 0} {
			if set {
				return errs.Errorf(errs.CodeInvalidInput, "%s: only for vector indexes (IVF_FLAT), not %s", name, s.Type)
			}
		}
		return nil
	}
	switch s.Type {
	case BTree, Bitmap:
		if _, err := keyKind(f.Name, f.Type); err != nil {
			return 0, err
		}
		if s.NoPositions {
			return 0, errs.Errorf(errs.CodeInvalidInput, "with_position: only for INVERTED (FTS) indexes")
		}
		return idx[0], vectorOnly()
	case Inverted:
		if f.Type.ID() != arrow.STRING && f.Type.ID() != arrow.LARGE_STRING {
			return 0, errs.Errorf(errs.CodeInvalidInput, "column: %q is %s; an INVERTED index takes a string column", f.Name, f.Type)
		}
		return idx[0], vectorOnly()
	case IVFFlat, IVFPQ:
		if s.NoPositions {
			return 0, errs.Errorf(errs.CodeInvalidInput, "with_position: only for INVERTED (FTS) indexes")
		}
		if _, ok := vectorDim(f.Type); !ok {
			return 0, errs.Errorf(errs.CodeInvalidInput, "column: %q is %s, not a vector column (fixed_size_list<float32>)", f.Name, f.Type)
		}
		s.Metric = strings.ToLower(s.Metric)
		switch s.Metric {
		case "":
			s.Metric = "l2"
		case "l2", "cosine", "dot":
		default:
			return 0, errs.Errorf(errs.CodeInvalidInput, "distance_type: %q (want l2, cosine or dot)", s.Metric)
		}
		if s.Partitions < 0 || s.Partitions > 65536 {
			return 0, errs.Errorf(errs.CodeInvalidInput, "num_partitions: 1 to 65536 (got %d)", s.Partitions)
		}
		if s.MaxIterations < 0 || s.MaxIterations > 1000 {
			return 0, errs.Errorf(errs.CodeInvalidInput, "max_iterations: 1 to 1000 (got %d)", s.MaxIterations)
		}
		if s.SampleRate < 0 || s.SampleRate > 1<<20 {
			return 0, errs.Errorf(errs.CodeInvalidInput, "sample_rate: 1 to %d (got %d)", 1<<20, s.SampleRate)
		}
		dim, _ := vectorDim(f.Type)
		if s.Type == IVFFlat {
			if s.SubVectors != 0 || s.Bits != 0 {
				return 0, errs.Errorf(errs.CodeInvalidInput, "num_sub_vectors, num_bits: only for IVF_PQ")
			}
			return idx[0], nil
		}
		if s.Metric == "dot" {
			return 0, errs.Errorf(errs.CodeInvalidInput, "distance_type: dot is not supported with IVF_PQ (l2 or cosine)")
		}
		if s.SubVectors == 0 {
			s.SubVectors = defaultSubVectors(dim)
		}
		if s.SubVectors < 1 || s.SubVectors > dim || dim%s.SubVectors != 0 {
			return 0, errs.Errorf(errs.CodeInvalidInput, "num_sub_vectors: %d does not divide the dimension %d", s.SubVectors, dim)
		}
		if s.Bits == 0 {
			s.Bits = 8
		}
		if s.Bits < 1 || s.Bits > 8 {
			return 0, errs.Errorf(errs.CodeInvalidInput, "num_bits: 1 to 8 (got %d)", s.Bits)
		}
		return idx[0], nil
	case "IVF_SQ", "IVF_HNSW_SQ", "IVF_HNSW_PQ", "IVF_HNSW_FLAT", "IVF_RQ", "HNSW", "LABEL_LIST", "NGRAM", "ZONEMAP":
		return 0, errs.Errorf(errs.CodeInvalidInput, "index_type: %s is not supported; this server builds BTREE, BITMAP, INVERTED (FTS), IVF_FLAT and IVF_PQ", s.Type)
	}
	return 0, errs.Errorf(errs.CodeInvalidInput, "index_type: %q is not an index type (BTREE, BITMAP, INVERTED, FTS, IVF_FLAT)", s.Type)
}

// IsVector reports whether typ names a vector index type.
func IsVector(typ string) bool {
	return strings.HasPrefix(strings.ToUpper(typ), "IVF_") || strings.EqualFold(typ, "HNSW")
}

// errNoMaintenance refuses an index on a catalog built without
// Maintenance: its commits would leave the index behind the table, and
// its reads would never use it.
var errNoMaintenance = errs.Errorf(errs.CodeInternal, "index: this catalog was built without index maintenance (table.Options.Indexes = index.Maintenance()); creating an index is refused")

// Create builds index spec over the latest version of t, replacing an
// index of the same name (queries use the old one until the new
// definition is written, then the new one). A catalog without
// Maintenance refuses it (errNoMaintenance).
func Create(ctx context.Context, t *table.Table, spec Spec) (*Meta, error) {
	if !t.Catalog().HasIndexMaintenance() {
		return nil, errNoMaintenance
	}
	m, schema, err := t.LoadSchema(ctx, 0)
	if err != nil {
		return nil, err
	}
	col, err := spec.normalize(schema)
	if err != nil {
		return nil, err
	}
	im := &Meta{
		Name: spec.Name, UUID: uuid.NewString(), Column: schema.Field(col).Name, Type: spec.Type,
		Version: m.Version, CreatedAt: time.Now().UTC().Truncate(time.Millisecond), Format: FormatVersion,
		Fragments: []Covered{},
	}
	if id, ok := m.FieldIDAt(col); ok {
		im.FieldID = &id
	}
	im.kind, _ = keyKind(im.Column, schema.Field(col).Type)
	im.Params.NoPositions = spec.Type == Inverted && spec.NoPositions
	if spec.Type == IVFFlat || spec.Type == IVFPQ {
		im.Metric = spec.Metric
		if err := train(ctx, t, m, col, im, spec); err != nil {
			return nil, err
		}
	}
	wh := t.Catalog().Warehouse()
	covered, err := buildFragments(ctx, t, im, col, m.Fragments)
	if err != nil {
		_ = wh.DeletePrefix(context.WithoutCancel(ctx), t.LineKey(dir+im.UUID+"/"))
		return nil, err
	}
	im.Fragments = covered
	// Commit over whatever definition is newest now (a replaced build's
	// extensions lose to this one).
	for attempt := 0; ; attempt++ {
		old, err := loadAny(ctx, t, spec.Name)
		if err == nil {
			im.Seq = 0
			if old != nil {
				im.Seq = old.Seq
			}
			err = commitDef(ctx, t, im)
		}
		if errors.Is(err, errDefRace) && attempt < maxDefAttempts {
			continue
		}
		if err != nil {
			_ = wh.DeletePrefix(context.WithoutCancel(ctx), t.LineKey(dir+im.UUID+"/"))
			return nil, err
		}
		if old != nil && old.UUID != im.UUID {
			_ = wh.DeletePrefix(context.WithoutCancel(ctx), t.LineKey(dir+old.UUID+"/"))
		}
		return im, nil
	}
}

// buildFragments writes the index file of each fragment, in parallel.
//
// A fragment with a deletion file is indexed as its live rows (the
// offsets its readers present): its coverage names the fragment's
// content (Fragment.Key, the data file and the deletion file), so a new
// deletion file under the same id is a fragment the index does not cover
// until it is extended again.
func buildFragments(ctx context.Context, t *table.Table, im *Meta, col int, frags []table.Fragment) ([]Covered, error) {
	out := make([]Covered, len(frags))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, f := range frags {
		g.Go(func() error {
			return table.Recover("build index", func() error {
				v, err := buildOne(gctx, t, im, col, f)
				if err != nil {
					return err
				}
				data, err := encode(v)
				if err != nil {
					return err
				}
				if err := t.Catalog().Warehouse().PutIfNotExists(gctx, im.fragmentFile(t, f), data); err != nil && !errors.Is(err, table.ErrExists) {
					return err
				}
				out[i] = Covered{ID: f.ID, Path: contentKey(f), Rows: f.Rows, Bytes: int64(len(data))}
				if sf, ok := v.(*scalarFile); ok {
					sf.keyRange(&out[i])
				}
				return nil
			})
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

func buildOne(ctx context.Context, t *table.Table, im *Meta, col int, f table.Fragment) (any, error) {
	switch im.Type {
	case BTree, Bitmap:
		cv, err := fragmentValues(ctx, t, f, col)
		if err != nil {
			return nil, err
		}
		return buildScalar(im.Type, im.kind, cv), nil
	case IVFFlat, IVFPQ:
		return assignFragment(ctx, t, im, col, f)
	case Inverted:
		return buildInverted(ctx, t, f, col, !im.Params.NoPositions)
	}
	return nil, fmt.Errorf("index type %s", im.Type)
}

// Extend indexes the fragments of t's latest version that index name does
// not cover (appended or rewritten since it was built) and forgets the
// fragments the latest version no longer has. It answers how many
// fragments it added to the definition. Concurrent extensions (and an
// extension racing a create or drop) are safe: the definition is
// committed compare-and-swap (commitDef), each attempt merging this
// extension's fragments into the newest definition and dropping the
// fragments the newest table version lacks. An index replaced or dropped
// meanwhile is left alone (0, nil): the new build is extended by the
// next commit.
func Extend(ctx context.Context, t *table.Table, name string) (int, error) {
	im, err := Load(ctx, t, name)
	if err != nil {
		return 0, err
	}
	return extend(ctx, t, im)
}

// extend is Extend from the definition im (as read).
func extend(ctx context.Context, t *table.Table, im *Meta) (int, error) {
	name := im.Name
	m, schema, err := t.LoadSchema(ctx, 0)
	if err != nil {
		return 0, err
	}
	idx := schema.FieldIndices(im.Column)
	if len(idx) == 0 {
		return 0, errs.Errorf(errs.CodeTableColumnNotFound, "index %q: column %q is gone", name, im.Column)
	}
	im.kind, _ = keyKind(im.Column, schema.Field(idx[0]).Type)
	// The column of that name is another field now (a swap of two names,
	// a drop and a rename to the dropped name), or the index was built
	// before field ids were recorded (it may hold another column's values
	// since): build every fragment again, for the column's field now,
	// under file names of its own. An index built over a version that
	// did not know ids is rebuilt once the table knows them.
	id, known := m.FieldIDAt(idx[0])
	refield := known && (im.FieldID == nil || *im.FieldID != id)
	if refield {
		b := *im
		b.FieldID = &id
		im = &b
	}
	var todo []table.Fragment
	live := map[uint32]bool{}
	for _, f := range m.Fragments {
		live[f.ID] = true
		if _, ok := im.covers(f); !ok || refield {
			todo = append(todo, f)
		}
	}
	gone := false
	for _, c := range im.Fragments {
		gone = gone || !live[c.ID]
	}
	if len(todo) == 0 && !gone {
		return 0, nil
	}
	added, err := buildFragments(ctx, t, im, idx[0], todo)
	if err != nil {
		return 0, err
	}
	wh := t.Catalog().Warehouse()
	if beforeDefCommit != nil {
		beforeDefCommit()
	}
	for attempt := 0; ; attempt++ {
		cur, err := loadAny(ctx, t, name)
		if err != nil {
			return 0, err
		}
		lm, err := t.Load(ctx, 0)
		if err != nil {
			return 0, err
		}
		if cur == nil || cur.Dropped || cur.UUID != im.UUID || !im.sameField(lm, nil) {
			// Replaced or dropped, or the column's field changed again
			// since this build read the table: this build's files go with
			// it (the next extension builds for the newest field), except
			// those the definition names (another extension of the same
			// build and field made the same file and committed it).
			named := map[string]bool{}
			if cur != nil && !cur.Dropped && cur.UUID == im.UUID {
				for _, c := range cur.Fragments {
					named[cur.coveredFile(t, c)] = true
				}
			}
			for _, c := range added {
				if k := im.coveredFile(t, c); !named[k] {
					_ = wh.Delete(context.WithoutCancel(ctx), k)
				}
			}
			return 0, nil
		}
		// Liveness from the newest table version, read after the newest
		// definition: a fragment gone there is gone for good (ids are not
		// reused), so no later definition can name it again. A
		// definition built for another field keeps none of its fragments.
		keep := sameID(cur.FieldID, im.FieldID)
		now := make(map[uint32]string, len(lm.Fragments))
		for _, f := range lm.Fragments {
			now[f.ID] = contentKey(f)
		}
		next := *cur
		next.Fragments = nil
		have := map[uint32]bool{}
		var removed []Covered
		for _, c := range cur.Fragments {
			if p, ok := now[c.ID]; ok && p == c.Path && keep {
				next.Fragments = append(next.Fragments, c)
				have[c.ID] = true
			} else {
				removed = append(removed, c)
			}
		}
		n := 0
		var unused []Covered
		for _, c := range added {
			switch p, ok := now[c.ID]; {
			case have[c.ID]:
			case ok && p == c.Path:
				next.Fragments = append(next.Fragments, c)
				have[c.ID] = true
				n++
			default:
				unused = append(unused, c)
			}
		}
		if n == 0 && len(removed) == 0 {
			return 0, nil // another extension did it all
		}
		sort.Slice(next.Fragments, func(i, j int) bool { return next.Fragments[i].ID < next.Fragments[j].ID })
		if next.Fragments == nil {
			next.Fragments = []Covered{}
		}
		next.Version = max(cur.Version, m.Version)
		next.FieldID = im.FieldID
		err = commitDef(ctx, t, &next)
		if errors.Is(err, errDefRace) && attempt < maxDefAttempts {
			continue
		}
		if err != nil {
			return 0, err
		}
		kept := make(map[string]bool, len(next.Fragments))
		for _, c := range next.Fragments {
			kept[next.coveredFile(t, c)] = true
		}
		for _, c := range removed {
			if k := cur.coveredFile(t, c); !kept[k] {
				_ = wh.Delete(context.WithoutCancel(ctx), k)
			}
		}
		for _, c := range unused {
			if k := im.coveredFile(t, c); !kept[k] {
				_ = wh.Delete(context.WithoutCancel(ctx), k)
			}
		}
		return n, nil
	}
}

// ExtendAll extends every index of t (see Extend).
func ExtendAll(ctx context.Context, t *table.Table) error {
	metas, err := List(ctx, t)
	if err != nil {
		return err
	}
	for _, im := range metas {
		if _, err := extend(ctx, t, im); err != nil {
			return fmt.Errorf("index %q: %w", im.Name, err)
		}
	}
	return nil
}

func vectorDim(t arrow.DataType) (int, bool) {
	fl, ok := t.(*arrow.FixedSizeListType)
	if !ok || fl.Elem().ID() != arrow.FLOAT32 {
		return 0, false
	}
	return int(fl.Len()), true
}

// Maintenance is what a catalog needs to use and keep up indexes
// (table.Options.Indexes): Select, Maintain and KeyIndexFor.
func Maintenance() table.Indexes {
	return table.Indexes{Select: Select, Maintain: Maintain, KeyIndex: KeyIndexFor}
}

// Maintain extends every index of t to the fragments a commit added or
// rewrote (table.IndexMaintainer): a view's refresh, an insert, an
// update, a compaction. A table without indexes costs one listing.
func Maintain(ctx context.Context, t *table.Table, m *table.Manifest) {
	if err := ExtendAll(ctx, t); err != nil {
		slog.WarnContext(ctx, "index: extend after a commit", "table", table.JoinID(t.ID()), "version", m.Version, "err", err)
	}
}

// sameID reports whether two field ids (nil: not recorded) are the same.
func sameID(a, b *int32) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// beforeDefCommit, set by tests, runs between an extension's build and
// its definition commit.
var beforeDefCommit func()
