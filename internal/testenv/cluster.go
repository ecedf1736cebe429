package testenv

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// RedisCluster is a three-master Redis Cluster on loopback ports, no
// replicas.
type RedisCluster struct {
	Nodes []*Redis
}

// URL is the redis-cluster:// URL naming every node.
func (c *RedisCluster) URL() string {
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.Addr)
	}
	return "redis-cluster://" + strings.Join(addrs, ",")
}

// StartRedisCluster starts three cluster-enabled redis-servers, joins them
// with redis-cli --cluster create and waits until the cluster is ok.
func StartRedisCluster(tb testing.TB) *RedisCluster {
	tb.Helper()
	c := &RedisCluster{}
	var addrs []string
	for range 3 {
		// A cluster node has only database 0.
		n, err := startRedis(tb.TempDir(), "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--databases", "1")
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(n.Stop)
		c.Nodes = append(c.Nodes, n)
		addrs = append(addrs, n.Addr)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		tb.Fatal("redis-cli not found on PATH: install redis-tools (apt-get install redis-server brings it)")
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		for _, n := range c.Nodes {
			info, err := command(n.Addr, "CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				ok = false
			}
		}
		if ok {
			return c
		}
		if time.Now().After(deadline) {
			tb.Fatal(fmt.Errorf("redis cluster on %v not ok after 30s", addrs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
