package service

import (
	"strings"
	"testing"

	"github.com/hibiken/asynq"
)

func TestParseRedisURL(t *testing.T) {
	for _, c := range []struct {
		url, mode string
		check     func(RedisTarget) bool
	}{
		{"redis://:pw@127.0.0.1:6379/3", "single", func(r RedisTarget) bool {
			o := r.Asynq.(asynq.RedisClientOpt)
			return r.Single.DB == 3 && o.DB == 3 && o.Password == "pw" && o.Addr == "127.0.0.1:6379"
		}},
		{"redis-sentinel://:pw@10.0.0.1:26379,10.0.0.2:26379/2?master=mymaster&sentinel_password=sp", "sentinel", func(r RedisTarget) bool {
			o := r.Asynq.(asynq.RedisFailoverClientOpt)
			f := r.Failover
			return f.MasterName == "mymaster" && len(f.SentinelAddrs) == 2 && f.DB == 2 && f.Password == "pw" && f.SentinelPassword == "sp" &&
				o.MasterName == "mymaster" && o.DB == 2 && o.Password == "pw" && o.SentinelPassword == "sp" && o.SentinelAddrs[1] == "10.0.0.2:26379"
		}},
		{"redis-cluster://u:pw@a:7000,b:7001,c:7002", "cluster", func(r RedisTarget) bool {
			o := r.Asynq.(asynq.RedisClusterClientOpt)
			return len(r.Cluster.Addrs) == 3 && r.Cluster.Username == "u" && r.Cluster.Password == "pw" && len(o.Addrs) == 3 && o.Password == "pw"
		}},
	} {
		r, err := ParseRedisURL(c.url)
		if err != nil || r.Mode != c.mode || !c.check(r) {
			t.Errorf("%s: %+v %v", c.url, r, err)
		}
	}
	for url, want := range map[string]string{
		"redis-sentinel://a:1/0":                      "master=NAME",
		"redis-sentinel://a:1/0?master=m&timeout=3":   `"timeout"`,
		"redis-sentinel://a/0?master=m":               "host:port",
		"redis-sentinel://a:1/x?master=m":             "database",
		"redis-cluster://a:1/2":                       "only database 0",
		"redis-cluster://a:1?master=m":                `"master"`,
		"redis-cluster://":                            "at least one",
		"memcached://a:1":                             "unsupported scheme",
		"redis-sentinel://:secret@a:1/0?master=m&x=1": `"x"`,
	} {
		_, err := ParseRedisURL(url)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", url, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error shows the password: %v", url, err)
		}
	}
}
