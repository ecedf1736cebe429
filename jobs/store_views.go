package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/errs"
)

// The store's view registry, schedules and automatic-refresh claims (see
// keys.go for the layout). Errors are CodeServiceUnavailable.

// registerView records that view reads source and whether it refreshes
// automatically, replacing its record and dropping its schedule.
func (s *store) registerView(ctx context.Context, view, source []string, auto bool) error {
	src, _ := json.Marshal(source)
	flag := "0"
	if auto {
		flag = "1"
	}
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.SAdd(ctx, depsKey(source), viewKey(view))
		p.HSet(ctx, viewRegKey(view), "source", string(src), "auto", flag)
		p.HDel(ctx, viewRegKey(view), "every")
		p.ZRem(ctx, schedKey, viewKey(view))
		return nil
	})
	if err != nil {
		return redisErr("register view", err)
	}
	return nil
}

// forgetView removes view's record, its dependency entry and its
// schedule; an unregistered view is left as it is.
func (s *store) forgetView(ctx context.Context, view []string) error {
	src, err := s.rdb.HGet(ctx, viewRegKey(view), "source").Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return redisErr("read view registry", err)
	}
	var source []string
	_ = json.Unmarshal([]byte(src), &source)
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if source != nil {
			p.SRem(ctx, depsKey(source), viewKey(view))
		}
		p.Del(ctx, viewRegKey(view))
		p.ZRem(ctx, schedKey, viewKey(view))
		return nil
	})
	if err != nil {
		return redisErr("forget view", err)
	}
	return nil
}

// unlink removes view from the dependents of source only.
func (s *store) unlink(ctx context.Context, source, view []string) error {
	if err := s.rdb.SRem(ctx, depsKey(source), viewKey(view)).Err(); err != nil {
		return redisErr("unlink view", err)
	}
	return nil
}

// dependents returns the registered views that read source, sorted by
// their key.
func (s *store) dependents(ctx context.Context, source []string) ([][]string, error) {
	ms, err := s.rdb.SMembers(ctx, depsKey(source)).Result()
	if err != nil {
		return nil, redisErr("read dependents", err)
	}
	sort.Strings(ms)
	out := make([][]string, len(ms))
	for i, m := range ms {
		out[i] = strings.Split(m, "/")
	}
	return out, nil
}

// registeredViews returns the registered views under namespace ns (nil:
// all of them), sorted by key.
func (s *store) registeredViews(ctx context.Context, ns []string) ([][]string, error) {
	what := "find registered views"
	if ns == nil {
		what = "list registered views"
	}
	return s.viewsWithKey(ctx, ns, keyPrefix+"viewreg:", "", what)
}

// queuedViews returns the views under namespace ns that have a FIFO of
// unfinished jobs, sorted by key.
func (s *store) queuedViews(ctx context.Context, ns []string) ([][]string, error) {
	return s.viewsWithKey(ctx, ns, keyPrefix+"view:", ":queue", "find view queues")
}

// viewsWithKey scans for the keys prefix+VIEW+suffix of the views under
// ns (nil: every view) and returns the views, sorted by key.
func (s *store) viewsWithKey(ctx context.Context, ns []string, prefix, suffix, what string) ([][]string, error) {
	under := prefix
	if ns != nil {
		under += viewKey(ns) + "/"
	}
	var keys []string
	if err := s.scanKeys(ctx, globEscape(under)+"*"+suffix, func(key string) error {
		keys = append(keys, strings.TrimSuffix(strings.TrimPrefix(key, prefix), suffix))
		return nil
	}); err != nil {
		return nil, redisErr(what, err)
	}
	sort.Strings(keys)
	out := make([][]string, len(keys))
	for i, k := range keys {
		out[i] = strings.Split(k, "/")
	}
	return out, nil
}

// autoClaim is what claimAuto decided.
type autoClaim struct {
	claimed bool          // the new job id is the view's pending automatic job
	delay   time.Duration // how long its plan waits (claimed only)
}

// claimAuto claims id as view's next automatic job unless the view is
// unregistered, has automatic refresh off (needAuto), or has one pending
// (scriptAutoClaim).
func (s *store) claimAuto(ctx context.Context, view []string, id string, now time.Time, minInterval, debounce time.Duration, needAuto bool) (autoClaim, error) {
	flag := "0"
	if needAuto {
		flag = "1"
	}
	res, err := scriptAutoClaim.Run(ctx, s.rdb, []string{viewRegKey(view)}, id, now.UnixMilli(),
		minInterval.Milliseconds(), debounce.Milliseconds(), jobKey(""), autoClaimTTL.Milliseconds(), flag).Slice()
	if err != nil {
		return autoClaim{}, redisErr("claim auto refresh", err)
	}
	if len(res) != 2 {
		return autoClaim{}, &errs.Error{Code: errs.CodeInternal, Message: fmt.Sprintf("auto claim answered %v", res)}
	}
	if n, _ := res[0].(int64); n != 1 {
		return autoClaim{}, nil
	}
	ms, _ := res[1].(int64)
	return autoClaim{claimed: true, delay: time.Duration(ms) * time.Millisecond}, nil
}

// unclaimAuto replaces view's claim of id (whose job was not created) by
// the PENDING job it joined, or by nothing when joined is "".
func (s *store) unclaimAuto(ctx context.Context, view []string, id, joined string) error {
	if err := scriptAutoUnclaim.Run(ctx, s.rdb, []string{viewRegKey(view)}, id, joined).Err(); err != nil {
		return redisErr("release auto refresh claim", err)
	}
	return nil
}

// setSchedule sets or clears (every 0) a registered view's schedule, the
// next fire one period after now; false when the view is not registered.
func (s *store) setSchedule(ctx context.Context, view []string, every time.Duration, now time.Time) (bool, error) {
	n, err := scriptSetSchedule.Run(ctx, s.rdb, []string{viewRegKey(view), schedKey},
		viewKey(view), every.Milliseconds(), now.UnixMilli()).Int()
	if err != nil {
		return false, redisErr("set the schedule", err)
	}
	return n >= 0, nil
}

// schedule returns view's schedule, nil when it has none.
func (s *store) schedule(ctx context.Context, view []string) (*Schedule, error) {
	var every *redis.StringCmd
	var next *redis.FloatCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		every = p.HGet(ctx, viewRegKey(view), "every")
		next = p.ZScore(ctx, schedKey, viewKey(view))
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, redisErr("read the schedule", err)
	}
	ms, err1 := every.Int64()
	at, err2 := next.Result()
	if err1 != nil || err2 != nil || ms <= 0 {
		return nil, nil
	}
	return &Schedule{Every: time.Duration(ms) * time.Millisecond, Next: time.UnixMilli(int64(at))}, nil
}

// dueView is a view whose scheduled period claimDue claimed.
type dueView struct {
	view []string
	due  time.Time
}

// claimDue claims up to batch views due at now and advances their
// schedules (scriptClaimDue).
func (s *store) claimDue(ctx context.Context, now time.Time, batch int) ([]dueView, error) {
	res, err := scriptClaimDue.Run(ctx, s.rdb, []string{schedKey}, now.UnixMilli(), batch, viewRegKey(nil)).StringSlice()
	if err != nil {
		return nil, redisErr("claim scheduled refreshes", err)
	}
	var out []dueView
	for i := 0; i+1 < len(res); i += 2 {
		due, _ := strconv.ParseFloat(res[i+1], 64)
		out = append(out, dueView{view: strings.Split(res[i], "/"), due: time.UnixMilli(int64(due))})
	}
	return out, nil
}
