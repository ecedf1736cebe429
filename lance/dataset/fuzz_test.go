package dataset

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
)

// seeds adds every file of the golden datasets matching the pattern.
func seeds(f *testing.F, pattern string) {
	f.Helper()
	for _, name := range []string{"history.lance", "v1.lance"} {
		paths, _ := filepath.Glob(filepath.Join("testdata", name, pattern))
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// FuzzManifest: any bytes decode to a manifest or an error, never a panic;
// a decoded manifest that validates encodes and decodes back to itself.
func FuzzManifest(f *testing.F) {
	seeds(f, "_versions/*.manifest")
	f.Fuzz(func(t *testing.T, b []byte) {
		mf, err := DecodeManifest(b)
		if err != nil {
			return
		}
		_ = CheckReaderFlags(mf.Manifest.GetReaderFeatureFlags())
		if Validate(mf.Manifest) != nil {
			return
		}
		out, err := EncodeManifest(mf)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeManifest(out)
		if err != nil {
			t.Fatalf("re-encoded manifest does not decode: %v", err)
		}
		mf.Manifest.TransactionSection, mf.Manifest.IndexSection = nil, nil
		back.Manifest.TransactionSection, back.Manifest.IndexSection = nil, nil
		if !proto.Equal(mf.Manifest, back.Manifest) {
			t.Fatal("manifest changed in a round trip")
		}
	})
}

// FuzzTransaction: transaction files decode or fail, never panic.
func FuzzTransaction(f *testing.F) {
	seeds(f, "_transactions/*.txn")
	f.Fuzz(func(t *testing.T, b []byte) {
		if txn, err := DecodeTransaction(b); err == nil {
			_ = OperationName(txn)
		}
	})
}

// FuzzDeletionArrow: Arrow deletion files decode or fail, never panic, and
// allocate within the decoder's cap.
func FuzzDeletionArrow(f *testing.F) {
	seeds(f, "_deletions/*.arrow")
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeDeletionArrow(b)
	})
}

// FuzzDeletionBitmap: roaring deletion files decode or fail, never panic;
// what decodes encodes back to the same set.
func FuzzDeletionBitmap(f *testing.F) {
	seeds(f, "_deletions/*.bin")
	f.Fuzz(func(t *testing.T, b []byte) {
		bm, err := DecodeDeletionBitmap(b)
		if err != nil {
			return
		}
		out, err := EncodeDeletionBitmap(bm)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeDeletionBitmap(out)
		if err != nil || !back.Equals(bm) {
			t.Fatalf("bitmap round trip: %v", err)
		}
	})
}

// FuzzManifestName: names parse or not, and what parses names back.
func FuzzManifestName(f *testing.F) {
	for _, s := range []string{"1.manifest", "18446744073709551614.manifest", "d1.manifest", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		v, s, ok := ParseManifestName(name)
		if ok {
			if v2, s2, ok2 := ParseManifestName(ManifestName(s, v)); !ok2 || v2 != v || s2 != s {
				t.Fatalf("%q -> %d %v does not name back", name, v, s)
			}
		}
	})
}
