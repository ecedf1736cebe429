package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// mergeInsert serves POST /v1/table/{id}/merge_insert: the body holds the
// rows (Arrow IPC; JSON rows as an extension), the query the options.
// A table declared without data is created from the body.
func (s *Server) mergeInsert(c *gin.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	o, timeout, err := mergeOptions(c)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if declared, err := s.cat.Declared(ctx, id); err != nil {
		return err
	} else if declared {
		rdr, err := s.bodyRecords(c, nil)
		if err != nil {
			return err
		}
		defer rdr.Release()
		_, m, r, err := s.cat.MergeCreate(ctx, id, rdr, o)
		if err != nil {
			return mergeTimeout(ctx, err)
		}
		c.JSON(http.StatusOK, mergeResponse(m, r))
		return nil
	}
	t, err := s.cat.OpenTable(ctx, id)
	if err != nil {
		return err
	}
	t, err = onBranch(c, t, nil)
	if err != nil {
		return err
	}
	rdr, err := s.latestBodyRecords(ctx, c, t)
	if err != nil {
		return err
	}
	defer rdr.Release()
	nm, r, err := t.MergeInsert(ctx, rdr, o)
	if err != nil {
		return mergeTimeout(ctx, err)
	}
	c.JSON(http.StatusOK, mergeResponse(nm, r))
	return nil
}

func mergeResponse(m *table.Manifest, r table.MergeResult) gin.H {
	return gin.H{"version": m.Version, "num_updated_rows": r.Updated, "num_inserted_rows": r.Inserted, "num_deleted_rows": r.Deleted}
}

// mergeTimeout names the timeout parameter when the request's own timeout
// ended the merge (503: nothing was committed).
func mergeTimeout(ctx context.Context, err error) error {
	if ctx.Err() == context.DeadlineExceeded {
		return errs.Errorf(errs.CodeServiceUnavailable, "timeout: merge_insert did not finish in time; nothing was committed")
	}
	return err
}

// mergeOptions reads the spec's query parameters. on may be repeated for
// a key of several columns. use_index=true matches through a BTREE or
// BITMAP index on a one-column key where one covers a fragment (the
// spec's hint: without such an index the match scans the key column).
func mergeOptions(c *gin.Context) (table.MergeOptions, time.Duration, error) {
	var o table.MergeOptions
	o.On = c.QueryArray("on")
	if len(o.On) == 0 {
		return o, 0, badInput("on: required (the key column to match rows on)")
	}
	for _, f := range []struct {
		name string
		dst  *bool
	}{
		{"when_matched_update_all", &o.WhenMatchedUpdateAll},
		{"when_not_matched_insert_all", &o.WhenNotMatchedInsertAll},
		{"when_not_matched_by_source_delete", &o.WhenNotMatchedBySourceDelete},
		{"use_index", &o.UseIndex},
	} {
		if v, ok := c.GetQuery(f.name); ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return o, 0, badInput("%s: %q is not true or false", f.name, v)
			}
			*f.dst = b
		}
	}
	o.WhenMatchedUpdateAllFilt = c.Query("when_matched_update_all_filt")
	o.WhenNotMatchedBySourceDeleteFilt = c.Query("when_not_matched_by_source_delete_filt")
	var timeout time.Duration
	if v := c.Query("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return o, 0, badInput("timeout: %q is not a positive duration such as 30s or 5m", v)
		}
		timeout = d
	}
	return o, timeout, nil
}
