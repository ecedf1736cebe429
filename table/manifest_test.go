package table

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func TestManifestNames(t *testing.T) {
	t.Parallel()
	for _, v := range []uint64{0, 1, 9, 10, 12345, math.MaxUint64 - 1} {
		for _, s := range []NamingScheme{NamingV1, NamingV2} {
			if s == NamingV1 && v >= 1e19 {
				continue // 20-digit names are V2; V1 versions stay below 10^19
			}
			name := ManifestName(v, s)
			got, gs, ok := ParseManifestName(name)
			if !ok || got != v || gs != s {
				t.Errorf("round trip %d %s: %q -> %d %s %v", v, s, name, got, gs, ok)
			}
		}
	}
	if ManifestName(1, NamingV2) != "18446744073709551614.manifest" {
		t.Errorf("V2 name of 1 = %q", ManifestName(1, NamingV2))
	}
	// V2 names sort newest first.
	if !(ManifestName(3, NamingV2) < ManifestName(2, NamingV2)) {
		t.Error("V2 names do not sort newest first")
	}
	for _, bad := range []string{"", ".manifest", "01.manifest", "x.manifest", "1.json", "123456789012345678901.manifest", "99999999999999999999.manifest"} {
		if _, _, ok := ParseManifestName(bad); ok {
			t.Errorf("ParseManifestName(%q) accepted", bad)
		}
	}
	if RowAddress(3, 7) != 3<<32|7 {
		t.Error("row address")
	}
	f, o := SplitRowAddress(RowAddress(5, 9))
	if f != 5 || o != 9 {
		t.Error("split row address")
	}
}

func TestDecodeManifestRejects(t *testing.T) {
	t.Parallel()
	for name, doc := range map[string]string{
		"not json":     `{`,
		"no schema":    `{"version":1}`,
		"dup fragment": `{"schema":"x","next_fragment_id":5,"fragments":[{"id":1,"path":"data/a"},{"id":1,"path":"data/b"}]}`,
		"id too big":   `{"schema":"x","next_fragment_id":1,"fragments":[{"id":1,"path":"data/a"}]}`,
		"escape":       `{"schema":"x","next_fragment_id":5,"fragments":[{"id":1,"path":"data/../../etc"}]}`,
		"outside":      `{"schema":"x","next_fragment_id":5,"fragments":[{"id":1,"path":"/etc/passwd"}]}`,
		"negative":     `{"schema":"x","next_fragment_id":5,"fragments":[{"id":1,"path":"data/a","rows":-1}]}`,
		"wrong type":   `{"schema":"x","version":"one"}`,
	} {
		if _, err := DecodeManifest([]byte(doc)); err == nil {
			t.Errorf("%s: accepted %s", name, doc)
		}
	}
}

func FuzzDecodeManifest(f *testing.F) {
	f.Add([]byte(`{"version":2,"schema":"x","next_fragment_id":2,"fragments":[{"id":1,"path":"data/a.parquet","rows":3}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	// A Lance manifest (the default format), with a deletion file and a
	// column map after a dropped column.
	enc, err := EncodeSchema(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true}}, nil))
	if err != nil {
		f.Fatal(err)
	}
	lm := &Manifest{Version: 3, UUID: newIdentity(), Schema: enc, NextFragmentID: 3, lance: true, Properties: map[string]json.RawMessage{"mvq.view": json.RawMessage(`{"kind":"query"}`)},
		Fragments: []Fragment{{ID: 0, Path: "data/a.lance", Rows: 8, Bytes: 100, DeletionID: 7, DeletionReadVersion: 2, DeletedRows: 2},
			{ID: 2, Path: "data/b.lance", Rows: 5, Bytes: 90, Columns: "0,2", leaves: "1,1,1"}}}
	lb, err := lm.Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(lb)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeManifest(data)
		if err != nil {
			return
		}
		ids := map[uint32]bool{}
		for _, fr := range m.Fragments {
			if ids[fr.ID] || fr.ID >= m.NextFragmentID || fr.Rows < 0 {
				t.Fatalf("accepted inconsistent manifest %s", data)
			}
			ids[fr.ID] = true
		}
		enc, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeManifest(enc); err != nil {
			t.Fatalf("re-encoded manifest rejected: %v", err)
		}
	})
}
