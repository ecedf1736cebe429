package jobs

import "strings"

// The names of every Redis key mvq keeps (jobs/doc.go has the table). Only
// the store (store.go) and the scripts it runs (scripts.go) use them; the
// asynq keys the create script writes are in asynqwire.go, and the HTTP
// idempotency records' keys in package idem (jobs/idem/keys.go), which
// Client.Idempotency gives keyPrefix.

// keyPrefix starts every mvq key. Its "{mvq}" is a Redis Cluster hash
// tag: every key hashes to the slot of "mvq", so each Lua script and
// multi-key step (which touch a job's keys, its view's queue, its
// cluster's sets and the indexes together) stays in one slot. The price
// is that mvq's records sit on one shard; asynq's queues, the bulk of the
// traffic, keep a slot per queue. A single Redis ignores the tag.
const keyPrefix = "{mvq}:"

// RedisKey is the full name of an mvq key given without its prefix
// ("job:ID:holders"), for tests and tools that read Redis directly.
func RedisKey(suffix string) string { return keyPrefix + suffix }

// queuePrefix starts asynq queue names (asynq adds its own hash tag per
// queue: asynq:{mvq:CLUSTER}:...).
const queuePrefix = "mvq:"

func jobKey(id string) string     { return keyPrefix + "job:" + id }
func eventsKey(id string) string  { return jobKey(id) + ":events" }
func planKey(id string) string    { return jobKey(id) + ":plan" }
func resultsKey(id string) string { return jobKey(id) + ":results" }
func succKey(id string) string    { return jobKey(id) + ":succ" }
func activeKey(id string) string  { return jobKey(id) + ":active" }
func holdersKey(id string) string { return jobKey(id) + ":holders" }
func deathsKey(id string) string  { return jobKey(id) + ":deaths" }
func queuedKey(id string) string  { return jobKey(id) + ":queued" }

// checkpointKey is the record of the finished work item whose output
// refresh.Engine.CheckpointKey keys as key (a hex hash): a string naming
// the job and item whose recorded result it is (store.checkpoint),
// expiring after CheckpointRetention.
func checkpointKey(key string) string { return keyPrefix + "ckpt:" + key }

// viewKey names a view in keys: its parts joined by "/", which no
// identifier part may contain, so two views never share keys (a "$"-joined
// name could: a part may contain the delimiter of another request).
func viewKey(view []string) string      { return strings.Join(view, "/") }
func viewJobsKey(view []string) string  { return keyPrefix + "view:" + viewKey(view) + ":jobs" }
func viewQueueKey(view []string) string { return keyPrefix + "view:" + viewKey(view) + ":queue" }
func viewPendingKey(view []string) string {
	return keyPrefix + "view:" + viewKey(view) + ":pending"
}
func workersKey(cluster string) string  { return keyPrefix + "cluster:" + cluster + ":workers" }
func liveJobsKey(cluster string) string { return keyPrefix + "cluster:" + cluster + ":unfinished" }
func lockKey(name string) string        { return keyPrefix + "lock:" + name }

// stoppedChannel is where a job's terminal transition publishes its id
// (scriptTransition publishes on it). A channel is not a key: no tag.
const stoppedChannel = "mvq:jobs:stopped"

const allJobsKey = keyPrefix + "jobs"

// QueueName is the asynq queue of a cluster's worker pool.
func QueueName(cluster string) string { return queuePrefix + cluster }

// The dependency registry. A view is registered at create and forgotten at
// drop; the warehouse holds the truth (each view's Definition), Redis the
// index that answers "which views read table T" on every commit.
//
//	mvq:deps:{source}   set   view keys of the views reading table source
//	mvq:viewreg:{view}  hash  source (JSON id), auto ("1"/"0"), pending
//	                          (the automatic job last claimed), claimed_at
//	                          and last_auto (unix ms), every (refresh_every
//	                          in ms; schedule.go), lag (target_lag in ms),
//	                          unseen (unix ms of the change that set the
//	                          pending deadline) and suspended ("1"; lag.go)
func depsKey(source []string) string  { return keyPrefix + "deps:" + viewKey(source) }
func viewRegKey(view []string) string { return keyPrefix + "viewreg:" + viewKey(view) }

// Scheduled refreshes (a view's refresh_every, and its target_lag's
// deadline: lag.go). The schedule lives in
// Redis next to the dependency registry, so it survives restarts of every
// process and is shared by the whole pool:
//
//	mvq:viewreg:{view}  hash  every: the period in ms (absent: none)
//	mvq:sched           zset  view key -> the next fire time (unix ms): the
//	                          next period, or the pending target-lag deadline
//
// Any number of Scheduler services poll the set; a Lua script claims the
// due views and advances their scores in one step, so each period fires
// once however many schedulers run.
const schedKey = keyPrefix + "sched"

// clustersKey is the set of every cluster a worker has ever served (added
// by each heartbeat, never expired), so a pool whose last worker is gone
// is still known and its gauges still have series.
const clustersKey = keyPrefix + "clusters"
