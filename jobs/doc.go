// Package jobs runs refreshes of materialized views as asynchronous jobs on
// asynq and Redis. The API side (Client) validates a request, writes a job
// record and enqueues the job's plan task; the worker side (Server) runs
// three task types, one file each:
//
//   - plan (plan.go): waits for the job's turn on its view (one running
//     refresh per view, first come first served), asks the engine for a
//     plan, stores it and releases the first Concurrency work items.
//   - workitem (workitem.go): expands one work item. Finishing an item
//     records its result and releases the next unreleased item, so at most
//     Concurrency items of a job are released and not yet done, whatever
//     the number of workers. The last item enqueues the commit.
//   - commit (commit.go): claims the commit (after which the job can no
//     longer be cancelled), commits the view version, marks the job DONE and
//     frees the view for the next job.
//
// Every task is safe to run more than once: asynq delivers at least once,
// and a task of a killed worker runs again once its lease expires. Task IDs
// ("plan:"+job, "item:"+job+":"+index, "commit:"+job) make re-enqueueing a
// no-op while the task exists; the per-item completion in Redis is
// idempotent (a second completion of an item changes nothing and hands
// back the successor the first one released); the engine's Expand and
// Commit are idempotent.
//
// # Redis layout
//
// One owner speaks the protocol: the store (store.go and store_*.go) is
// the only code that calls Redis; keys.go names every key and scripts.go
// holds every Lua script, whose answers the store decodes into typed
// results (transitionOutcome, turn, itemStart, createOutcome, ...).
// asynqwire.go is the one coupling to asynq's storage: enqueuePlan
// enqueues a job's plan task on every topology.
//
// All keys start with "{mvq}:" (keyPrefix; written "mvq:" below, where
// {x} stands for a value). "{mvq}" is a Redis Cluster hash tag: every key
// is in the slot of "mvq", so the Lua scripts and multi-key steps below,
// which touch a job's keys together with its view's queue, its cluster's
// sets and the indexes, work on a Redis Cluster (redis-cluster://) as on
// one node; scans visit every master (store.scanKeys). Tools and tests
// name keys with RedisKey. Times are RFC 3339 strings with nanoseconds.
//
//	mvq:job:{id}               hash   the job record (fields of Job, plus the
//	                                  dispatch counter "released")
//	mvq:job:{id}:events        stream the job's events (MAXLEN ~1000)
//	mvq:job:{id}:plan          string the plan JSON (written once, SET NX)
//	mvq:job:{id}:results       hash   item index -> ItemResult JSON (done items)
//	mvq:job:{id}:succ          hash   item index -> index its completion
//	                                  released (-1: none)
//	mvq:job:{id}:active        hash   item index -> 1 while its handler runs
//	                                  (its size is the running count whose
//	                                  peak is progress.max_running)
//	mvq:job:{id}:holders       hash   logical task id ("plan:J", "item:J:3",
//	                                  "commit:J") -> worker id while a
//	                                  handler runs it (the rescuer re-runs
//	                                  the tasks of dead workers)
//	mvq:job:{id}:queued        hash   logical task id -> asynq id of the
//	                                  copy the rescuer enqueued for it,
//	                                  until a worker holds the task
//	mvq:job:{id}:deaths        set    "task\x00worker" for each worker that
//	                                  died holding a task (the rescuer fails
//	                                  the job at MaxWorkerDeaths of one task)
//	mvq:jobs                   zset   all job ids, score 0, newest last by
//	                                  lexical order (ids are UUIDv7)
//	mvq:view:{view}:jobs       zset   the same, per view ({view}: its parts joined with "/")
//	mvq:view:{view}:queue      list   FIFO of the view's unfinished jobs; the
//	                                  head is the one allowed to run
//	mvq:view:{view}:pending    hash   request fingerprint -> id of the job
//	                                  created with it; a new request with
//	                                  that fingerprint joins the job while it
//	                                  is PENDING (coalescing)
//	mvq:cluster:{name}:workers zset   live worker ids -> heartbeat expiry
//	                                  (unix ms); the key itself expires
//	                                  when heartbeats stop
//	mvq:cluster:{name}:unfinished zset PENDING and RUNNING job ids ->
//	                                  creation (unix ms): the backlog
//	                                  admission counts, the rescuer's work
//	mvq:idem:{sha256}          hash   an Idempotency-Key's request
//	                                  fingerprint, state and response, with
//	                                  mvq:idem-of:{sha256} (a principal's
//	                                  records by age); package idem owns
//	                                  both names and their scripts, under
//	                                  this package's prefix
//	mvq:lock:{name}            string a service's lock (janitor,
//	                                  rescuer:{cluster}, staleness) -> holder
//	mvq:clusters               set    every cluster a worker ever served
//	                                  (heartbeats add; the API's gauges)
//	mvq:deps:{table}           set    views reading table (store_views.go)
//	mvq:viewreg:{view}         hash   the view's source, auto_refresh flag,
//	                                  its automatic job claim,
//	                                  refresh_every, target_lag, its
//	                                  unseen change and the suspended flag
//	                                  (store_views.go)
//	mvq:sched                  zset   view -> next scheduled refresh or
//	                                  target-lag deadline (ms)
//	mvq:ckpt:{key}             string a finished work item's checkpoint:
//	                                  the job and item whose result (in
//	                                  that job's results) it is, under
//	                                  refresh.Engine.CheckpointKey; expires
//	                                  after CheckpointRetention
//
// A job record's progress_at is stamped by every event; the rescuer fails
// a RUNNING job whose progress_at is older than the stall timeout. Terminal
// transitions publish the job id on mvq:jobs:stopped (the canceller).
//
// A terminal job's record and events expire after JobRetention; its plan,
// results, succ, active and holders keys after DispatchRetention.
//
// Besides the task handlers, a Server runs four services (each with
// Start/Stop): Heartbeater, Canceller, Rescuer and, when configured,
// Janitor; docs/ARCHITECTURE.md describes them.
//
// asynq queues are "mvq:"+cluster (no tag: asynq tags each queue itself). State changes are Lua scripts that
// check the current state, write the change and append its event in one
// step, so a job never shows a state without its event, cancel and the
// commit claim cannot both win, and a completion is counted once. The
// scripts touch keys they compute (all under the one hash tag), which
// Redis Cluster allows within a slot.
package jobs
