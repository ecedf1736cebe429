// Package testenv starts the real services tests need: a redis-server on a
// free loopback port, owned by the test binary.
package testenv

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Redis is a running redis-server.
type Redis struct {
	Addr string
	cmd  *exec.Cmd
}

// URL is the redis:// URL of the server, database db.
func (r *Redis) URL(db int) string { return fmt.Sprintf("redis://%s/%d", r.Addr, db) }

// Stop kills the server.
func (r *Redis) Stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
	}
}

// StartRedis starts redis-server on a free loopback port with no
// persistence and waits until it answers. It fails the test with a hint
// when redis-server is not installed.
func StartRedis(tb testing.TB) *Redis {
	tb.Helper()
	r, err := startRedis(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.Stop)
	return r
}

var (
	sharedOnce sync.Once
	shared     *Redis
	sharedErr  error
	sharedDB   int
	sharedMu   sync.Mutex
)

// SharedRedis returns one redis-server per test binary and a database
// number of its own for each caller (64 at most), so parallel tests do not
// see each other's keys. Call StopShared from TestMain.
func SharedRedis(tb testing.TB) (*Redis, int) {
	tb.Helper()
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mvq-redis-")
		if err != nil {
			sharedErr = err
			return
		}
		shared, sharedErr = startRedis(dir)
	})
	if sharedErr != nil {
		tb.Fatal(sharedErr)
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedDB >= 64 {
		tb.Fatal("testenv: more than 64 shared redis databases requested")
	}
	db := sharedDB
	sharedDB++
	return shared, db
}

// StopShared stops the shared server, if one was started.
func StopShared() {
	if shared != nil {
		shared.Stop()
	}
}

func startRedis(dir string, extra ...string) (*Redis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found on PATH: install it (apt-get install redis-server) — the tests start their own")
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--databases", "64", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"), "--protected-mode", "no")
	cmd.Args = append(cmd.Args, extra...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	r := &Redis{Addr: addr, cmd: cmd}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if ping(addr) {
			return r, nil
		}
		select {
		case <-ctx.Done():
			r.Stop()
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			return nil, fmt.Errorf("redis-server on %s did not answer: %s", addr, log)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
