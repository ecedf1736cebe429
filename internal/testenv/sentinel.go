package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Sentinel is a Redis master, one replica and one redis-sentinel
// monitoring them, all on loopback ports: the smallest setup in which a
// failover happens.
type Sentinel struct {
	Name     string // the monitored master's name
	Addr     string // the sentinel's address
	Master   *Redis
	Replica  *Redis
	sentinel *exec.Cmd
}

// URL is the redis-sentinel:// URL of database db.
func (s *Sentinel) URL(db int) string {
	return fmt.Sprintf("redis-sentinel://%s/%d?master=%s", s.Addr, db, s.Name)
}

// StartSentinel starts the three servers and waits until the sentinel
// sees the replica. The master fails over one second after it stops
// answering (down-after-milliseconds 1000, quorum 1).
func StartSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	master, err := startRedis(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(master.Stop)
	mhost, mport, _ := net.SplitHostPort(master.Addr)
	replica, err := startRedis(tb.TempDir(), "--replicaof", mhost, mport)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(replica.Stop)
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	s := &Sentinel{Name: "mvq", Addr: fmt.Sprintf("127.0.0.1:%d", port), Master: master, Replica: replica}
	cfg := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndir %s\nlogfile %s\n"+
		"sentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %s 1000\n"+
		"sentinel failover-timeout %s 10000\nsentinel parallel-syncs %s 1\n",
		port, dir, filepath.Join(dir, "sentinel.log"), s.Name, mhost, mport, s.Name, s.Name, s.Name)
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		tb.Fatal(err)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatal("redis-server not found on PATH: install it (apt-get install redis-server)")
	}
	s.sentinel = exec.Command(bin, conf, "--sentinel")
	if err := s.sentinel.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.sentinel.Process.Kill(); _ = s.sentinel.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if out, err := command(s.Addr, "SENTINEL", "REPLICAS", s.Name); err == nil && strings.Contains(out, replica.Addr[strings.LastIndexByte(replica.Addr, ':')+1:]) {
			if role, err := command(replica.Addr, "ROLE"); err == nil && strings.Contains(role, "connected") {
				return s
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "sentinel.log"))
			tb.Fatalf("sentinel did not see the replica in 30s:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// MasterAddr is the address the sentinel names as master now.
func (s *Sentinel) MasterAddr() (string, error) {
	out, err := command(s.Addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.Name)
	if err != nil {
		return "", err
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return "", fmt.Errorf("sentinel answered %q", out)
	}
	return f[0] + ":" + f[1], nil
}

// command sends one command over RESP and returns the reply flattened to
// space-separated words (enough for the status and array replies used
// here).
func command(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	var words []string
	var read func() error
	read = func() error {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			return fmt.Errorf("empty reply")
		}
		switch line[0] {
		case '+', ':':
			words = append(words, line[1:])
		case '-':
			return fmt.Errorf("%s", line[1:])
		case '$':
			var n int
			fmt.Sscan(line[1:], &n)
			if n < 0 {
				return nil
			}
			buf := make([]byte, n+2)
			if _, err := io.ReadFull(r, buf); err != nil {
				return err
			}
			words = append(words, string(buf[:n]))
		case '*':
			var n int
			fmt.Sscan(line[1:], &n)
			for range n {
				if err := read(); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := read(); err != nil {
		return "", err
	}
	return strings.Join(words, " "), nil
}
