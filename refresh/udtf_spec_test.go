package refresh

import (
	"slices"
	"testing"

	"github.com/mvq-dev/mvq/table"
)

// The udtf_spec fields recorded but not acted on are reported in the
// prepared options, the way manifest_not_honoured reports a manifest's.
func TestUDTFSpecNotHonoured(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0)

	cpus, gpus, mem, batch, indexed := 2.0, 1.0, int64(1<<30), true, "emb"
	entry := chunkerEntry(fixed4)
	entry.NumCPUs, entry.NumGPUs, entry.Memory, entry.Batch, entry.PartitionByIndexedColumn = &cpus, &gpus, &mem, &batch, &indexed
	c := b.create(t, "chunks", CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`, UDTFSpec: entry})
	q := b.create(t, "en", CreateRequest{Kind: "query", SourceQuery: queryView})

	all := []string{"udtf_name", "udtf_version", "partition_by_indexed_column", "num_cpus", "num_gpus", "memory", "batch"}
	// What the client sent in the field is replaced by what Prepare found.
	o := Options{UDTFSpecNotHonoured: []string{"sent"}}
	if err := b.e.Prepare(b.ctx, c, &o); err != nil || !slices.Equal(o.UDTFSpecNotHonoured, all) {
		t.Fatalf("chunker view: udtf_spec_not_honoured %q, %v; want %q", o.UDTFSpecNotHonoured, err, all)
	}
	// The plan keeps the options as prepared, so the job shows the list.
	p, err := b.e.Plan(b.ctx, c, "j1", o)
	if err != nil || !slices.Equal(p.Options.UDTFSpecNotHonoured, all) {
		t.Fatalf("plan options %+v, %v", p, err)
	}
	o = Options{UDTFSpecNotHonoured: []string{"sent"}}
	if err := b.e.Prepare(b.ctx, q, &o); err != nil || o.UDTFSpecNotHonoured != nil {
		t.Fatalf("query view (no udtf_spec): udtf_spec_not_honoured %q, %v; want none", o.UDTFSpecNotHonoured, err)
	}

	for _, tc := range []struct {
		entry *UDTFEntry
		want  []string
	}{
		{nil, nil},
		{&UDTFEntry{Kind: "udtf"}, nil},
		{&UDTFEntry{Kind: "udtf", UDTFName: "f"}, []string{"udtf_name"}},
		{&UDTFEntry{Kind: "udtf", Memory: &mem, Batch: &batch}, []string{"memory", "batch"}},
	} {
		if got := tc.entry.NotHonoured(); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: NotHonoured %q, want %q", tc.entry, got, tc.want)
		}
	}
}
