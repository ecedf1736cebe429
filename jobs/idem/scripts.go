package idem

import "github.com/redis/go-redis/v9"

// This file holds every Lua script the package runs; only the Store
// (idem.go) runs them, and decodes their answers next to the call.

// scriptBegin claims an idempotency key or reports what holds it.
//
// A new claim enters the principal's index; index entries older than the
// records' TTL are dropped, and past the cap the oldest records go with
// their entries.
//
// KEYS: record, principal's index. ARGV: fingerprint, pending TTL ms, now
// ms, record TTL ms, cap.
// Returns {"new"}, {"mismatch"}, {"pending"} or {"done", status, ctype, body}.
var scriptBegin = redis.NewScript(`
local fp = redis.call('HGET', KEYS[1], 'fp')
if not fp then
  redis.call('HSET', KEYS[1], 'fp', ARGV[1], 'state', 'pending')
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  local now, ttl, cap = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (now - ttl))
  redis.call('ZADD', KEYS[2], now, KEYS[1])
  local n = redis.call('ZCARD', KEYS[2])
  if n > cap then
    for _, old in ipairs(redis.call('ZRANGE', KEYS[2], 0, n - cap - 1)) do
      redis.call('DEL', old)
    end
    redis.call('ZREMRANGEBYRANK', KEYS[2], 0, n - cap - 1)
  end
  redis.call('PEXPIRE', KEYS[2], ttl)
  return {'new'}
end
if fp ~= ARGV[1] then return {'mismatch'} end
local v = redis.call('HMGET', KEYS[1], 'state', 'status', 'ctype', 'body')
if v[1] ~= 'done' then return {'pending'} end
return {'done', v[2], v[3] or '', v[4] or ''}
`)

// scriptFinish stores the response of the pending request that owns
// the key (same fingerprint), or, with an empty status, frees the key.
//
// KEYS: record. ARGV: fingerprint, status ("" to abandon), ctype, body, TTL ms.
var scriptFinish = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'fp') ~= ARGV[1] or redis.call('HGET', KEYS[1], 'state') ~= 'pending' then return 0 end
if ARGV[2] == '' then return redis.call('DEL', KEYS[1]) end
redis.call('HSET', KEYS[1], 'state', 'done', 'status', ARGV[2], 'ctype', ARGV[3], 'body', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
`)
