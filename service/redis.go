package service

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/telemetry"
)

// RedisTarget is MVQ_REDIS_URL resolved into the options of both Redis
// clients mvq uses: go-redis (job records, scripts) and asynq (queues).
type RedisTarget struct {
	Mode string // "single", "sentinel" or "cluster"
	// Exactly one of these is set, by Mode.
	Single   *redis.Options
	Failover *redis.FailoverOptions
	Cluster  *redis.ClusterOptions
	Asynq    asynq.RedisConnOpt
}

// ParseRedisURL accepts
//
//	redis://[[user]:password@]host:port[/db]          one node (also rediss:// for TLS, unix://)
//	redis-sentinel://[[user]:password@]host:port[,host:port...][/db]?master=NAME[&sentinel_password=P]
//	redis-cluster://[[user]:password@]host:port[,host:port...]
//
// The Sentinel form names the sentinels; clients ask them for the master
// of NAME and follow failovers. The password is the data nodes'
// (sentinel_password, when set, is the sentinels'). The Cluster form
// names any subset of the nodes; it has no database (Cluster has only 0).
// Unknown query parameters are refused.
func ParseRedisURL(s string) (RedisTarget, error) {
	scheme, _, ok := strings.Cut(s, "://")
	if !ok {
		return RedisTarget{}, fmt.Errorf("redis url: want redis://, rediss://, unix://, redis-sentinel:// or redis-cluster://")
	}
	switch scheme {
	case "redis", "rediss", "unix":
		opt, err := redis.ParseURL(s)
		if err != nil {
			return RedisTarget{}, fmt.Errorf("redis url: %w", err)
		}
		return RedisTarget{Mode: "single", Single: opt, Asynq: asynq.RedisClientOpt{
			Network: opt.Network, Addr: opt.Addr, Username: opt.Username, Password: opt.Password, DB: opt.DB, TLSConfig: opt.TLSConfig,
		}}, nil
	case "redis-sentinel", "redis-cluster":
	default:
		return RedisTarget{}, fmt.Errorf("redis url: unsupported scheme %q (want redis, rediss, unix, redis-sentinel or redis-cluster)", scheme)
	}
	u, err := url.Parse(s)
	if err != nil {
		return RedisTarget{}, fmt.Errorf("redis url: %v", redactErr(err))
	}
	var addrs []string
	for _, a := range strings.Split(u.Host, ",") {
		if a == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return RedisTarget{}, fmt.Errorf("redis url: address %q: want host:port", a)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return RedisTarget{}, fmt.Errorf("redis url: %s:// needs at least one host:port", scheme)
	}
	user := u.User.Username()
	pass, _ := u.User.Password()
	q := u.Query()
	db := 0
	if p := strings.Trim(u.Path, "/"); p != "" {
		if db, err = strconv.Atoi(p); err != nil || db < 0 {
			return RedisTarget{}, fmt.Errorf("redis url: database %q: want a number", p)
		}
	}
	if scheme == "redis-cluster" {
		for k := range q {
			return RedisTarget{}, fmt.Errorf("redis url: unknown parameter %q for redis-cluster://", k)
		}
		if db != 0 {
			return RedisTarget{}, fmt.Errorf("redis url: redis-cluster:// has only database 0")
		}
		return RedisTarget{Mode: "cluster",
			Cluster: &redis.ClusterOptions{Addrs: addrs, Username: user, Password: pass},
			Asynq:   asynq.RedisClusterClientOpt{Addrs: addrs, Username: user, Password: pass},
		}, nil
	}
	master := q.Get("master")
	sentinelPass := q.Get("sentinel_password")
	for k := range q {
		if k != "master" && k != "sentinel_password" {
			return RedisTarget{}, fmt.Errorf("redis url: unknown parameter %q for redis-sentinel:// (want master, sentinel_password)", k)
		}
	}
	if master == "" {
		return RedisTarget{}, fmt.Errorf("redis url: redis-sentinel:// needs ?master=NAME")
	}
	return RedisTarget{Mode: "sentinel",
		Failover: &redis.FailoverOptions{MasterName: master, SentinelAddrs: addrs, SentinelPassword: sentinelPass,
			Username: user, Password: pass, DB: db},
		Asynq: asynq.RedisFailoverClientOpt{MasterName: master, SentinelAddrs: addrs, SentinelPassword: sentinelPass,
			Username: user, Password: pass, DB: db},
	}, nil
}

// redactErr drops a URL parse error's copy of the URL, which may hold a
// password.
func redactErr(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// withPool returns t with a connection pool of n (a copy: t's options are
// not changed).
func (t RedisTarget) withPool(n int) RedisTarget {
	switch {
	case t.Failover != nil:
		o := *t.Failover
		o.PoolSize = n
		t.Failover = &o
	case t.Cluster != nil:
		o := *t.Cluster
		o.PoolSize = n
		t.Cluster = &o
	case t.Single != nil:
		o := *t.Single
		o.PoolSize = n
		t.Single = &o
	}
	return t
}

// Client opens the go-redis client of t.
func (t RedisTarget) Client() redis.UniversalClient {
	switch {
	case t.Failover != nil:
		return redis.NewFailoverClient(t.Failover)
	case t.Cluster != nil:
		return redis.NewClusterClient(t.Cluster)
	default:
		return redis.NewClient(t.Single)
	}
}

// redisClients opens a go-redis client (traced) and the asynq connection
// options for MVQ_REDIS_URL.
func redisClients(rawURL string) (redis.UniversalClient, asynq.RedisConnOpt, error) {
	return redisClientsPool(rawURL, 0)
}

// redisClientsPool is redisClients with a pool of poolSize connections
// (per node; 0: go-redis's default).
func redisClientsPool(rawURL string, poolSize int) (redis.UniversalClient, asynq.RedisConnOpt, error) {
	t, err := ParseRedisURL(rawURL)
	if err != nil {
		return nil, nil, err
	}
	if poolSize > 0 {
		t = t.withPool(poolSize)
	}
	rdb := t.Client()
	// A span per command, named by the command, without its arguments or
	// its caller: the statement of a job's create script carries the
	// job's request (an inline manifest may hold env_vars values) and an
	// idempotency record the response it replays, which have no place in
	// traces; and formatting them, with a stack walk for the caller, cost
	// about a tenth of an accept's CPU (BenchmarkAcceptVsPeer's profile).
	// Without a span exporter the spans would record nothing, and no log
	// line names a Redis command's span: no hook then.
	if !telemetry.Recording() {
		return rdb, t.Asynq, nil
	}
	if err := redisotel.InstrumentTracing(rdb, redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false)); err != nil {
		rdb.Close()
		return nil, nil, fmt.Errorf("redis tracing: %w", err)
	}
	return rdb, t.Asynq, nil
}
