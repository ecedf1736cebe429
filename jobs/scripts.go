package jobs

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// This file holds every Lua script mvq runs but the HTTP idempotency
// records' (jobs/idem/scripts.go); only the store (store*.go) runs them. Their KEYS and ARGV are documented with each one; their
// answers are decoded into typed results next to the store method that
// runs them, so no other code reads a script's numbers or words.

// luaNames writes the Go constants a script names into it: a script says
// @RUNNING where it means StateRunning, so a state, phase or channel is
// spelled in one place.
var luaNames = strings.NewReplacer(
	"@PENDING", "'"+string(StatePending)+"'",
	"@RUNNING", "'"+string(StateRunning)+"'",
	"@EXPANDING", "'"+PhaseExpanding+"'",
	"@CHANGED", "'"+ChangedChannel+"'",
	"@STOPPED", "'"+stoppedChannel+"'",
)

func newScript(src string) *redis.Script { return redis.NewScript(luaNames.Replace(src)) }

// luaEmit appends an event to a job's stream, with the job's state, phase
// and progress as they are after the change the script made, stamps the
// record's progress_at (what the rescuer measures stalls by) and announces
// the change on ChangedChannel, unless quiet (a log line: progress_at is
// not in a job's JSON). Every script that changes what a job's JSON shows
// announces it (jobcache.go).
const luaEmit = `
local function emit(jk, ek, typ, msg, now, maxlen, quiet)
  if redis.call('EXISTS', ek) == 0 then
    -- The job's first event, written by the first event after it (the
    -- create script does not): the id and fields Client.Events gives a
    -- reader that came first (firstEvent).
    local c = redis.call('HMGET', jk, 'created_ms', 'created_at')
    if c[1] then
      redis.call('XADD', ek, 'MAXLEN', '~', maxlen, c[1] .. '-0',
        'type', 'state', 'state', @PENDING, 'phase', '', 'message', 'submitted', 'time', c[2],
        'items_total', '0', 'items_done', '0', 'items_failed', '0',
        'rows_read', '0', 'rows_written', '0', 'max_running', '0', 'items_reused', '0')
    end
  end
  redis.call('HSET', jk, 'progress_at', now)
  local f = redis.call('HMGET', jk, 'state', 'phase', 'items_total', 'items_done', 'items_failed', 'rows_read', 'rows_written', 'max_running', 'items_reused')
  local v = {}
  for i = 1, 9 do v[i] = f[i] or '' end
  local id = redis.call('XADD', ek, 'MAXLEN', '~', maxlen, '*',
    'type', typ, 'state', v[1], 'phase', v[2], 'message', msg, 'time', now,
    'items_total', v[3], 'items_done', v[4], 'items_failed', v[5],
    'rows_read', v[6], 'rows_written', v[7], 'max_running', v[8], 'items_reused', v[9])
  if not quiet then redis.call('PUBLISH', @CHANGED, jk) end
  return id
end
`

// scriptCreate writes a new job record, indexes it, joins the view's FIFO
// and the cluster's set of unfinished jobs and enqueues its plan task. Its
// first event ("submitted") is written by the job's next event (emit) with
// the id created_ms-0; Client.Events gives a reader that comes before the
// same event (firstEvent), so Last-Event-ID resumes see one history.
// It refuses when no live worker serves the cluster. A view's PENDING job
// with the same request fingerprint (the effective options) is joined
// instead, unless it was created more than the join age ago (its plan task
// may be lost: see healLostPlan): nothing is written and its record is
// returned. Otherwise the job is
// refused when the cluster's backlog is full. Checks and writes are one
// step, so a refused job leaves nothing behind and two identical requests
// cannot both create a job while one is PENDING.
//
// KEYS: job, events (unused here), all-jobs index, view index, view queue, cluster's
// unfinished jobs, cluster's workers, view's pending jobs by fingerprint,
// then the plan task's asynq keys: task, queue's pending list, all queues,
// queue's scheduled set (see asynqwire.go).
// ARGV: id, now, "fresh" when the id is a new UUIDv7 made for this call
// (no plan task can hold it, so the plan task is not looked for; the
// record's EXISTS stays, see store.create), "known"
// when this process has put the queue in asynq's set of all queues before
// (as asynq's client, it does so once), backlog limit (0: none), created (unix
// ms), fingerprint ("": never join), pending TTL ms, job key prefix, join
// age ms, plan task message ("": none), task id, now (unix ns), queue,
// run at (unix s; 0: now, else the task is scheduled), then the record's
// field/value pairs (created_ms among them, for emit).
// Returns 1 (created: also when a run of this very call before it created
// the job, which go-redis runs again after a read timeout), 0 (the record
// exists), -2 (backlog full), -3 (no live worker) or {id, created ms} of
// the PENDING job joined.
//
// Each redis.call costs about as much again as the command it runs, so the
// script makes as few as its checks allow: a join (luaJoin) is HGET,
// ZCOUNT and one HMGET of the joined job's state and age. The joined
// job's record is not returned:
// reading it whole into Lua and answering it cost more than the rest of
// the join, and its request is this one's (the fingerprint is of the
// effective options). The record's EXISTS comes after the join (a join
// writes nothing; the id the view's pending index gives is compared with
// this call's own).
var scriptCreate = newScript(luaJoin + `
local fresh = ARGV[3] == 'fresh'
local joined = join(KEYS[8], KEYS[7], KEYS[6], ARGV[7], ARGV[6], ARGV[9], ARGV[10], ARGV[1])
if joined == 'own' then return 1 end
if joined then return joined end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local limit = tonumber(ARGV[5])
if limit > 0 and redis.call('ZCARD', KEYS[6]) >= limit then return -2 end
redis.call('HSET', KEYS[1], unpack(ARGV, 16))
redis.call('ZADD', KEYS[3], 0, ARGV[1])
redis.call('ZADD', KEYS[4], 0, ARGV[1])
redis.call('RPUSH', KEYS[5], ARGV[1])
redis.call('ZADD', KEYS[6], ARGV[6], ARGV[1])
if ARGV[7] ~= '' then
  redis.call('HSET', KEYS[8], ARGV[7], ARGV[1])
  redis.call('PEXPIRE', KEYS[8], ARGV[8])
end
if ARGV[11] ~= '' and (fresh or redis.call('EXISTS', KEYS[9]) == 0) then
  if tonumber(ARGV[15]) > 0 then
    redis.call('HSET', KEYS[9], 'msg', ARGV[11], 'state', 'scheduled')
    redis.call('ZADD', KEYS[12], ARGV[15], ARGV[12])
  else
    redis.call('HSET', KEYS[9], 'msg', ARGV[11], 'state', 'pending', 'pending_since', ARGV[13])
    redis.call('LPUSH', KEYS[10], ARGV[12])
  end
  if ARGV[4] ~= 'known' then redis.call('SADD', KEYS[11], ARGV[14]) end
end
-- The first event is not written here: the job's next event writes it
-- first (emit), with the id created_ms-0, and a reader that comes before
-- that is given the same event (Client.Events).
return 1
`)

// luaJoin is the join both scriptCreate and scriptJoin make: join(view's
// pending index, cluster's workers, cluster's unfinished jobs,
// fingerprint ("": none), now ms, job key prefix, join age ms, this
// submit's own id) answers 'own' when the index names the submit's own
// id (a run again of a call that made its job: the HGET comes before the
// worker check, so it answers so even if the cluster's last worker left
// in between), -3 when no live worker serves the cluster, {id, created
// ms} of the PENDING job with the fingerprint when it is younger than the
// join age (created_ms is in every record this version writes; an older
// record's age is its score among the cluster's unfinished jobs), else
// false.
const luaJoin = `
local function join(pending, workers, unfinished, fp, now, prefix, age, own)
  local other = false
  if fp ~= '' then
    other = redis.call('HGET', pending, fp)
    if other == own then return 'own' end
  end
  if redis.call('ZCOUNT', workers, '(' .. now, '+inf') == 0 then return -3 end
  if other then
    local ok = redis.call('HMGET', prefix .. other, 'state', 'created_ms')
    if ok[1] == @PENDING then
      local created = ok[2] or redis.call('ZSCORE', unfinished, other) or '0'
      if tonumber(created) > tonumber(now) - tonumber(age) then
        return {other, created}
      end
    end
  end
  return false
end
`

// scriptJoin is the join of scriptCreate alone (luaJoin), for a submit
// that expects to join (Client.submit's join hints): it answers {id,
// created ms} of the view's PENDING job with the fingerprint, -3 when no
// live worker serves the cluster, or 0 when there is nothing to join (the
// caller then runs scriptCreate, which checks again; the pending job
// being the submit's own id, as when an automatic refresh's submit runs
// again with its id, is nothing to join: scriptCreate answers it
// created). It writes nothing. Its arguments are a tenth of
// scriptCreate's, which Redis turns into Lua strings whether they are
// used or not.
//
// KEYS: view's pending jobs by fingerprint, cluster's workers, cluster's
// unfinished jobs. ARGV: fingerprint, now (unix ms), job key prefix, join
// age ms, the id the submit's job would have.
var scriptJoin = newScript(luaJoin + `
local joined = join(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
if joined == 'own' or not joined then return 0 end
return joined
`)

// scriptTransition changes a job record when its state is one of the
// allowed ones and its phase is not the forbidden one, and appends an
// event. A field name starting with "+" is incremented by its value. A
// terminal change (job TTL > 0) also removes the job from its view queue
// and its cluster's unfinished jobs, sets the TTLs and publishes the job id
// on stoppedChannel (the canceller listens).
//
// KEYS: job, events, view queue, cluster's unfinished jobs, then dispatch
// keys to expire.
// ARGV: allowed states "|A|B|", forbidden phase (or ""), event type (or ""
// for none), message, now, maxlen, job TTL seconds (0: not terminal),
// dispatch TTL seconds, job id, then field/value pairs.
//
// Returns {code, state, phase} with the state and phase after the call;
// code -1: no such job, 0: refused, 1: changed, 2: already so (no event).
// A terminal change adds the first two jobs left in the view queue (the
// next job's plan is woken without another round trip).
var scriptTransition = newScript(luaEmit + `
local cur = redis.call('HMGET', KEYS[1], 'state', 'phase')
if not cur[1] then return {-1, '', ''} end
local phase = cur[2] or ''
if not string.find(ARGV[1], '|' .. cur[1] .. '|', 1, true) or (ARGV[2] ~= '' and phase == ARGV[2]) then
  return {0, cur[1], phase}
end
local same = true
for i = 10, #ARGV, 2 do
  local k = ARGV[i]
  if string.sub(k, 1, 1) == '+' then
    same = false
  elseif redis.call('HGET', KEYS[1], k) ~= ARGV[i+1] then
    same = false
  end
end
if same then return {2, cur[1], phase} end
for i = 10, #ARGV, 2 do
  local k = ARGV[i]
  if string.sub(k, 1, 1) == '+' then
    redis.call('HINCRBY', KEYS[1], string.sub(k, 2), ARGV[i+1])
  else
    redis.call('HSET', KEYS[1], k, ARGV[i+1])
  end
end
if ARGV[3] ~= '' then
  emit(KEYS[1], KEYS[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
else
  redis.call('PUBLISH', @CHANGED, KEYS[1])
end
if tonumber(ARGV[7]) > 0 then
  redis.call('LREM', KEYS[3], 0, ARGV[9])
  redis.call('ZREM', KEYS[4], ARGV[9])
  redis.call('EXPIRE', KEYS[1], ARGV[7])
  redis.call('EXPIRE', KEYS[2], ARGV[7])
  for i = 5, #KEYS do redis.call('EXPIRE', KEYS[i], ARGV[8]) end
  redis.call('PUBLISH', @STOPPED, ARGV[9])
  local now = redis.call('HMGET', KEYS[1], 'state', 'phase')
  return {1, now[1], now[2] or '', redis.call('LRANGE', KEYS[3], 0, 1)}
end
local now = redis.call('HMGET', KEYS[1], 'state', 'phase')
return {1, now[1], now[2] or ''}
`)

// scriptAcquire decides whether a job may run on its view: it may when it
// is at the head of the view's FIFO. Heads that are finished (or whose
// record is gone) are popped; a live job missing from the queue joins it.
// A job at the head is recorded as held by the worker in the same step
// (the round trip a separate hold would cost).
//
// KEYS: view queue, job, job's holders, job's queued rescue copies. ARGV:
// job id, job key prefix, task ("": record no holder), worker, holders TTL
// seconds.
// Returns "head", "wait" or "gone" (the job is terminal or unknown).
var scriptAcquire = newScript(`
local st = redis.call('HGET', KEYS[2], 'state')
if st ~= @PENDING and st ~= @RUNNING then return 'gone' end
for i = 1, 10000 do
  local head = redis.call('LINDEX', KEYS[1], 0)
  if not head then
    redis.call('RPUSH', KEYS[1], ARGV[1])
  elseif head == ARGV[1] then
    if ARGV[3] ~= '' then
      redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
      redis.call('EXPIRE', KEYS[3], ARGV[5])
      redis.call('HDEL', KEYS[4], ARGV[3])
    end
    return 'head'
  else
    local hs = redis.call('HGET', ARGV[2] .. head, 'state')
    if hs == @PENDING or hs == @RUNNING then
      if not redis.call('LPOS', KEYS[1], ARGV[1]) then redis.call('RPUSH', KEYS[1], ARGV[1]) end
      return 'wait:' .. head
    end
    redis.call('LPOP', KEYS[1])
  end
end
return 'wait'
`)

// scriptDispatch starts a planned job's dispatch once: it records the item
// count and the first release and moves the job to phase expanding.
//
// KEYS: job, events. ARGV: total, first release, now, maxlen.
// Returns 1 when the job is RUNNING (dispatch started now or before), 0
// when it is not.
var scriptDispatch = newScript(luaEmit + `
if redis.call('HGET', KEYS[1], 'state') ~= @RUNNING then return 0 end
if redis.call('HSETNX', KEYS[1], 'released', ARGV[2]) == 1 then
  redis.call('HSET', KEYS[1], 'items_total', ARGV[1], 'phase', @EXPANDING)
  emit(KEYS[1], KEYS[2], 'phase', 'planned ' .. ARGV[1] .. ' work items', ARGV[3], ARGV[4])
end
return 1
`)

// scriptStartItem marks an item running and tracks the peak number of
// running items.
//
// KEYS: job, results, active. ARGV: index.
// Returns 1 (running), 0 (the item is already done) or -1 (the job is not
// RUNNING).
var scriptStartItem = newScript(`
if redis.call('HGET', KEYS[1], 'state') ~= @RUNNING then return -1 end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 0 end
redis.call('HSET', KEYS[3], ARGV[1], 1)
local n = redis.call('HLEN', KEYS[3])
if n > tonumber(redis.call('HGET', KEYS[1], 'max_running') or '0') then
  redis.call('HSET', KEYS[1], 'max_running', n)
  redis.call('PUBLISH', @CHANGED, KEYS[1])
end
return 1
`)

// scriptCompleteItem records a finished item once and releases the next
// unreleased item. A repeated completion changes nothing and returns what
// the first one released. When recorded now, the item's checkpoint record
// is written too (when a sixth key names it), and a reused item (its
// output copied from the job the last argument names) counts in
// items_reused and says so in its event.
//
// KEYS: job, events, results, succ, active[, checkpoint].
// ARGV: index, result JSON, rows read, rows written, now, maxlen,
// checkpoint record JSON ({job, item}), checkpoint TTL ms, reused from
// ("": expanded).
// Returns {code, released index (-1: none), items done}; code 1: recorded
// now, 0: recorded before, -1: the job is not RUNNING (nothing recorded).
var scriptCompleteItem = newScript(luaEmit + `
redis.call('HDEL', KEYS[5], ARGV[1])
if redis.call('HGET', KEYS[1], 'state') ~= @RUNNING then return {-1, -1, 0} end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then
  return {0, tonumber(redis.call('HGET', KEYS[4], ARGV[1]) or '-1'), redis.call('HLEN', KEYS[3])}
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[1], 'items_done', 1)
redis.call('HINCRBY', KEYS[1], 'rows_read', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'rows_written', ARGV[4])
local total = tonumber(redis.call('HGET', KEYS[1], 'items_total') or '0')
local released = tonumber(redis.call('HGET', KEYS[1], 'released') or '0')
local nxt = -1
if released < total then
  nxt = released
  redis.call('HSET', KEYS[1], 'released', released + 1)
end
redis.call('HSET', KEYS[4], ARGV[1], nxt)
if KEYS[6] then
  redis.call('SET', KEYS[6], ARGV[7], 'PX', ARGV[8])
end
local msg = 'work item ' .. ARGV[1] .. ' done'
if ARGV[9] ~= '' then
  redis.call('HINCRBY', KEYS[1], 'items_reused', 1)
  msg = 'work item ' .. ARGV[1] .. ' reused from job ' .. ARGV[9]
end
emit(KEYS[1], KEYS[2], 'progress', msg, ARGV[5], ARGV[6])
return {1, nxt, redis.call('HLEN', KEYS[3])}
`)

// scriptSetKind records the view's kind on a job record and announces it.
// KEYS: job. ARGV: kind.
var scriptSetKind = newScript(`
redis.call('HSET', KEYS[1], 'kind', ARGV[1])
redis.call('PUBLISH', @CHANGED, KEYS[1])
return 1
`)

// scriptRelease deletes a hash field only while it still has the given
// value: a worker forgets the tasks it holds, never another's.
//
// KEYS: hash. ARGV: field, value. Returns 1 when deleted.
var scriptRelease = newScript(`
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
`)

// scriptHandOver hands a task to a rescue copy: while the task's holder
// is still the expected one (a dead worker, or none, and then the queued
// copy is still the expected one), it forgets the holder and records the
// copy as queued.
//
// KEYS: holders, queued. ARGV: task, holder ("" none), queued copy ("" none;
// checked only without a holder), new copy, TTL seconds. Returns 1 when
// handed over.
var scriptHandOver = newScript(`
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then return 0 end
if ARGV[2] == '' then
  if (redis.call('HGET', KEYS[2], ARGV[1]) or '') ~= ARGV[3] then return 0 end
else
  redis.call('HDEL', KEYS[1], ARGV[1])
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return 1
`)

// scriptUnlock deletes a lock only while it holds the given token.
//
// KEYS: lock. ARGV: token. Returns 1 when deleted.
var scriptUnlock = newScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// scriptExtend extends a lock's TTL while it holds the given token.
//
// KEYS: lock. ARGV: token, ttl ms. Returns 1 when extended.
var scriptExtend = newScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`)

// scriptAutoClaim decides whether a view needs a new automatic job. It
// does not when the view is suspended, when automatic refresh is off for
// it (cause auto or notification), or when the job it claimed last is still PENDING (or
// being created: claimed less than claimTTL ago with no record yet).
// Otherwise it claims the new job id and says how long the job's plan must
// wait: the debounce, or the rest of the minimum interval since the last
// automatic start.
//
// KEYS: view registry hash. ARGV: new job id, now (unix ms), min interval
// ms, debounce ms, job key prefix, claim TTL ms, "1" when the cause needs
// auto_refresh on.
// Returns {1, delay ms} (claimed) or {0, reason}: "off", "suspended",
// "unregistered" or the pending job's id.
var scriptAutoClaim = newScript(`
local reg = redis.call('HMGET', KEYS[1], 'source', 'auto', 'pending', 'claimed_at', 'last_auto', 'suspended')
if not reg[1] then return {0, 'unregistered'} end
if reg[6] == '1' then return {0, 'suspended'} end
if ARGV[7] == '1' and reg[2] ~= '1' then return {0, 'off'} end
local now = tonumber(ARGV[2])
if reg[3] then
  local st = redis.call('HGET', ARGV[5] .. reg[3], 'state')
  if st == @PENDING then return {0, reg[3]} end
  if not st and now - (tonumber(reg[4]) or 0) < tonumber(ARGV[6]) then return {0, reg[3]} end
end
local at = now + tonumber(ARGV[4])
local last = tonumber(reg[5])
if last and last + tonumber(ARGV[3]) > at then at = last + tonumber(ARGV[3]) end
redis.call('HSET', KEYS[1], 'pending', ARGV[1], 'claimed_at', now, 'last_auto', at)
return {1, at - now}
`)

// scriptAutoUnclaim replaces a claim whose job was not created: by the
// PENDING job it joined, or by nothing.
// KEYS: view registry hash. ARGV: claimed job id, joined job id ("": none).
var scriptAutoUnclaim = newScript(`
if redis.call('HGET', KEYS[1], 'pending') ~= ARGV[1] then return 0 end
if ARGV[2] ~= '' then
  redis.call('HSET', KEYS[1], 'pending', ARGV[2])
else
  redis.call('HDEL', KEYS[1], 'pending', 'claimed_at')
end
return 1
`)

// scriptSetSchedule sets or clears a registered view's schedule; the next
// fire is one period from now. A period replaces the view's target lag.
// KEYS: view registry hash, schedule zset. ARGV: view key, period ms ("0":
// none), now ms. Returns -1 when the view is not registered, else 1.
var scriptSetSchedule = newScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if ARGV[2] == '0' then
  if redis.call('HDEL', KEYS[1], 'every') == 1 then redis.call('ZREM', KEYS[2], ARGV[1]) end
  return 1
end
redis.call('HDEL', KEYS[1], 'lag', 'unseen')
redis.call('HSET', KEYS[1], 'every', ARGV[2])
redis.call('ZADD', KEYS[2], tonumber(ARGV[3]) + tonumber(ARGV[2]), ARGV[1])
return 1
`)

// scriptSetTargetLag sets or clears a registered view's target lag. A lag
// replaces the view's period; its deadline is set by the next change
// (scriptMarkLag), so the set leaves the schedule set.
// KEYS: view registry hash, schedule zset. ARGV: view key, lag ms ("0":
// none). Returns -1 when the view is not registered, else 1.
var scriptSetTargetLag = newScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local had = redis.call('HMGET', KEYS[1], 'every', 'lag')
if had[1] or had[2] then redis.call('ZREM', KEYS[2], ARGV[1]) end
redis.call('HDEL', KEYS[1], 'every', 'lag', 'unseen')
if ARGV[2] ~= '0' then redis.call('HSET', KEYS[1], 'lag', ARGV[2]) end
return 1
`)

// scriptMarkLag records a change of a target-lag view's source the view
// has not seen: the first such change since the last fire sets the
// deadline (change time + lag - expected refresh time) in the schedule
// set; later ones leave it (they are coalesced into that refresh). A
// view without a target lag, or suspended, is left as it is.
// KEYS: view registry hash, schedule zset. ARGV: view key, change time
// ms, expected refresh ms. Returns the deadline ms, or 0 when nothing was
// set.
var scriptMarkLag = newScript(`
local reg = redis.call('HMGET', KEYS[1], 'lag', 'unseen', 'suspended')
local lag = tonumber(reg[1])
if not lag or lag <= 0 or reg[2] or reg[3] == '1' then return 0 end
local at = tonumber(ARGV[2])
local due = at + lag - math.min(tonumber(ARGV[3]), lag)
redis.call('HSET', KEYS[1], 'unseen', at)
redis.call('ZADD', KEYS[2], due, ARGV[1])
return due
`)

// scriptClaimDue claims the views whose next fire time has come. A view
// with a period is moved to its next one (from its due time, or from now
// when a whole period was missed, so a pool that was down fires once, not
// once per missed period); it is due at now. A view with a target lag
// leaves the set (its next change sets a new deadline) and is due up to
// one poll early (at now + early), so polling never makes it late. A
// suspended view is claimed but not returned. A view no longer registered
// or with neither leaves the set.
// KEYS: schedule zset. ARGV: now ms, batch size, registry key prefix,
// early ms. Returns {view key, due ms, "every"|"lag", ...}.
var scriptClaimDue = newScript(`
local now = tonumber(ARGV[1])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now + tonumber(ARGV[4]), 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for i = 1, #due, 2 do
  local v, at = due[i], tonumber(due[i + 1])
  local reg = redis.call('HMGET', ARGV[3] .. v, 'every', 'lag', 'suspended')
  local every, lag = tonumber(reg[1]), tonumber(reg[2])
  if lag and lag > 0 then
    redis.call('ZREM', KEYS[1], v)
    redis.call('HDEL', ARGV[3] .. v, 'unseen')
    if reg[3] ~= '1' then
      table.insert(out, v)
      table.insert(out, due[i + 1])
      table.insert(out, 'lag')
    end
  elseif not every or every <= 0 then
    redis.call('ZREM', KEYS[1], v)
  elseif at <= now then
    local nxt = at + every
    if nxt <= now then nxt = now + every end
    redis.call('ZADD', KEYS[1], nxt, v)
    if reg[3] ~= '1' then
      table.insert(out, v)
      table.insert(out, due[i + 1])
      table.insert(out, 'every')
    end
  end
end
return out
`)

// scriptSuspend sets or clears a registered view's suspended flag.
// Suspending drops a target-lag view's pending deadline (resume catches
// up instead).
// KEYS: view registry hash, schedule zset. ARGV: view key, "1" suspend or
// "0" resume. Returns -1 when the view is not registered, else 1.
var scriptSuspend = newScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[1], 'suspended', '1')
  if redis.call('HEXISTS', KEYS[1], 'lag') == 1 then
    redis.call('ZREM', KEYS[2], ARGV[1])
    redis.call('HDEL', KEYS[1], 'unseen')
  end
else
  redis.call('HDEL', KEYS[1], 'suspended')
end
return 1
`)

// scriptLog appends a log event to a RUNNING job (others are left as they
// are: a late line must not follow the terminal event).
//
// KEYS: job, events. ARGV: message, now, maxlen. Returns 1 or 0.
var scriptLog = newScript(luaEmit + `
if redis.call('HGET', KEYS[1], 'state') ~= @RUNNING then return 0 end
emit(KEYS[1], KEYS[2], 'log', ARGV[1], ARGV[2], ARGV[3], true)
return 1
`)
