package refresh

import (
	"context"
	"strconv"

	"github.com/mvq-dev/mvq/table"
)

// externalRecomputed counts the data files an external source (a table
// mirrored from another engine's, package iceberg) read again between
// the version v was last refreshed from and version to, because delete
// files came to touch them: their view rows were removed and computed
// again, which the job's result reports. It reads the versions'
// metadata only; a source that is not external, or a version that
// cannot be read, counts nothing.
func (e *Engine) externalRecomputed(ctx context.Context, v *View, to uint64) int64 {
	if v.Watermark == nil {
		return 0
	}
	t, err := e.source(ctx, v)
	if err != nil {
		return 0
	}
	var n int64
	for ver := v.Watermark.SourceVersion + 1; ver <= to; ver++ {
		m, err := t.Load(ctx, ver)
		if err != nil || !m.IsExternal() {
			return n
		}
		c, _ := strconv.ParseInt(m.Metadata[table.MetaExternalRecomputed], 10, 64)
		n += c
	}
	return n
}
