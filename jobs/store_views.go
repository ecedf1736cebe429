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
// automatically, replacing its record and dropping its schedule, target
// lag and suspension.
func (s *store) registerView(ctx context.Context, view, source []string, auto bool) error {
	src, _ := json.Marshal(source)
	flag := "0"
	if auto {
		flag = "1"
	}
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.SAdd(ctx, depsKey(source), viewKey(view))
		p.HSet(ctx, viewRegKey(view), "source", string(src), "auto", flag)
		p.HDel(ctx, viewRegKey(view), "every", "lag", "unseen", "suspended")
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

// setTargetLag sets or clears (lag 0) a registered view's target lag;
// false when the view is not registered.
func (s *store) setTargetLag(ctx context.Context, view []string, lag time.Duration) (bool, error) {
	n, err := scriptSetTargetLag.Run(ctx, s.rdb, []string{viewRegKey(view), schedKey},
		viewKey(view), lag.Milliseconds()).Int()
	if err != nil {
		return false, redisErr("set the target lag", err)
	}
	return n >= 0, nil
}

// lagState is what markLag needs to know before it estimates a refresh:
// the view's target lag (0: none) and whether a deadline is already set or
// the view is suspended (then a change adds nothing).
func (s *store) lagState(ctx context.Context, view []string) (lag time.Duration, idle bool, err error) {
	res, err := s.rdb.HMGet(ctx, viewRegKey(view), "lag", "unseen", "suspended").Result()
	if err != nil {
		return 0, false, redisErr("read the target lag", err)
	}
	ms, _ := strconv.ParseInt(fmt.Sprint(res[0]), 10, 64)
	return time.Duration(ms) * time.Millisecond, res[1] == nil && res[2] == nil, nil
}

// markLag records an unseen change of a target-lag view's source at
// (scriptMarkLag); it returns the deadline it set, zero when it set none.
func (s *store) markLag(ctx context.Context, view []string, at time.Time, expected time.Duration) (time.Time, error) {
	ms, err := scriptMarkLag.Run(ctx, s.rdb, []string{viewRegKey(view), schedKey},
		viewKey(view), at.UnixMilli(), expected.Milliseconds()).Int64()
	if err != nil {
		return time.Time{}, redisErr("mark the view behind its target lag", err)
	}
	if ms == 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(ms), nil
}

// suspend sets (on) or clears a registered view's suspended flag; false
// when the view is not registered.
func (s *store) suspend(ctx context.Context, view []string, on bool) (bool, error) {
	flag := "0"
	if on {
		flag = "1"
	}
	n, err := scriptSuspend.Run(ctx, s.rdb, []string{viewRegKey(view), schedKey}, viewKey(view), flag).Int()
	if err != nil {
		return false, redisErr("suspend the view", err)
	}
	return n >= 0, nil
}

// schedule returns view's schedule, nil when it has no period, no target
// lag and is not suspended.
func (s *store) schedule(ctx context.Context, view []string) (*Schedule, error) {
	var reg *redis.SliceCmd
	var next *redis.FloatCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		reg = p.HMGet(ctx, viewRegKey(view), "every", "lag", "suspended", "auto")
		next = p.ZScore(ctx, schedKey, viewKey(view))
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, redisErr("read the schedule", err)
	}
	vals := reg.Val()
	if len(vals) != 4 {
		return nil, nil
	}
	ms := func(v any) time.Duration {
		n, _ := strconv.ParseInt(fmt.Sprint(v), 10, 64)
		return time.Duration(max(n, 0)) * time.Millisecond
	}
	out := &Schedule{Every: ms(vals[0]), TargetLag: ms(vals[1]), Suspended: vals[2] == "1", Auto: vals[3] == "1"}
	if out.Every == 0 && out.TargetLag == 0 && !out.Suspended {
		return nil, nil
	}
	if at, err := next.Result(); err == nil {
		out.Next = time.UnixMilli(int64(at))
	}
	return out, nil
}

// dueView is a view whose scheduled period or target-lag deadline
// claimDue claimed.
type dueView struct {
	view []string
	due  time.Time
	lag  bool // a target-lag deadline, not a period
}

// claimDue claims up to batch views due at now (target-lag views: at
// now+early) and advances their schedules (scriptClaimDue).
func (s *store) claimDue(ctx context.Context, now time.Time, batch int, early time.Duration) ([]dueView, error) {
	res, err := scriptClaimDue.Run(ctx, s.rdb, []string{schedKey}, now.UnixMilli(), batch, viewRegKey(nil), early.Milliseconds()).StringSlice()
	if err != nil {
		return nil, redisErr("claim scheduled refreshes", err)
	}
	var out []dueView
	for i := 0; i+2 < len(res); i += 3 {
		due, _ := strconv.ParseFloat(res[i+1], 64)
		out = append(out, dueView{view: strings.Split(res[i], "/"), due: time.UnixMilli(int64(due)), lag: res[i+2] == "lag"})
	}
	return out, nil
}
