package service

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/mvq-dev/mvq/auth"
)

// DevStateDir is where mvq dev keeps its Redis data inside a file://
// warehouse (hidden entries are not namespaces).
const DevStateDir = ".mvq-dev"

// DevAddrs is what a dev server serves, for its banner.
type DevAddrs struct {
	API   string // host:port of the API, the console (/ui/) and /metrics
	Redis string // redis:// URL of its job records and queues
	// RedisKept: the records persist across restarts (a redis-server
	// with AOF in the warehouse), not an in-memory Redis.
	RedisKept bool
}

// RunDev runs the API and a worker in one process on a Redis of its own;
// cfg.RedisURL is ignored. ready gets the addresses it serves. Authentication
// defaults to none, which needs a loopback listen address (the default)
// unless unauthenticated access is allowed explicitly.
//
// With a file:// warehouse and redis-server on PATH, job records, events
// and queues persist across restarts: a redis-server child with AOF
// (appendfsync everysec) keeps them in <warehouse>/.mvq-dev/redis, and a
// lock file there stops a second mvq dev on the same warehouse. Otherwise
// (no redis-server, or a mem:// or object-store warehouse) an embedded
// in-memory Redis (miniredis) is used and jobs are lost on exit, which is
// logged; tables and views are in the warehouse either way.
func RunDev(ctx context.Context, cfg Config, ready func(DevAddrs)) error {
	if cfg.Auth.Mode == "" {
		cfg.Auth.Mode = auth.ModeNone
	}
	if err := cfg.Auth.Check(cfg.Listen); err != nil {
		return err
	}
	url, kept, stopRedis, err := devRedis(ctx, cfg.Warehouse)
	if err != nil {
		return err
	}
	defer stopRedis()
	cfg.RedisURL = url
	TuneGC()
	core, tel, stopCore, err := boot(ctx, cfg, "mvq-dev")
	if err != nil {
		return err
	}
	defer stopCore()
	stop, err := startWorker(cfg, core, false)
	if err != nil {
		return err
	}
	defer stop()
	return serveAPI(ctx, cfg, core, tel, func(addr string) {
		if ready != nil {
			ready(DevAddrs{API: addr, Redis: url, RedisKept: kept})
		}
	})
}

// devRedis starts the dev server's Redis and returns its URL, whether its
// records persist, and a stop function.
func devRedis(ctx context.Context, warehouse string) (string, bool, func(), error) {
	mr := miniredis.NewMiniRedis()
	dir, persistent := devRedisDir(warehouse)
	bin, lookErr := exec.LookPath("redis-server")
	if persistent && lookErr == nil {
		url, stop, err := startDevRedis(ctx, bin, dir)
		if err != nil {
			return "", false, nil, err
		}
		slog.Info("mvq dev: redis-server with AOF, jobs persist", "dir", dir)
		return url, true, stop, nil
	}
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return "", false, nil, fmt.Errorf("embedded redis: %w", err)
	}
	why := "redis-server is not on PATH"
	if !persistent {
		why = "the warehouse is not a file:// folder"
	}
	slog.Warn("mvq dev: embedded in-memory Redis; job records are lost on exit (install redis-server to keep them)", "reason", why, "addr", mr.Addr())
	return "redis://" + mr.Addr() + "/0", false, mr.Close, nil
}

// devRedisDir is <warehouse>/.mvq-dev/redis for a file:// warehouse.
func devRedisDir(warehouse string) (string, bool) {
	if warehouse == "" {
		warehouse = "file://./warehouse"
	}
	p, ok := strings.CutPrefix(warehouse, "file://")
	if !ok {
		return "", false
	}
	if q := strings.IndexByte(p, '?'); q >= 0 {
		p = p[:q]
	}
	abs, err := filepath.Abs(p)
	if err != nil || p == "" {
		return "", false
	}
	return filepath.Join(abs, DevStateDir, "redis"), true
}

// startDevRedis runs redis-server on a free loopback port with its AOF in
// dir, holding dir/lock while it runs. Stopping it asks for a clean
// shutdown (SIGTERM: the AOF is flushed) and waits.
func startDevRedis(ctx context.Context, bin, dir string) (string, func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("dev redis dir: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", nil, fmt.Errorf("dev redis lock: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return "", nil, fmt.Errorf("another mvq dev uses this warehouse (%s is locked): stop it first", filepath.Join(dir, "lock"))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		lock.Close()
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	logFile := filepath.Join(dir, "redis.log")
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--protected-mode", "no",
		"--dir", dir, "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
		"--logfile", logFile)
	cmd.SysProcAttr = devRedisProcAttr()
	if err := cmd.Start(); err != nil {
		lock.Close()
		return "", nil, fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		lock.Close()
	}
	// Loading a large AOF takes a while: wait until it answers PONG.
	deadline := time.Now().Add(60 * time.Second)
	for !redisPing(addr) {
		select {
		case <-exited:
			lock.Close()
			log, _ := os.ReadFile(logFile)
			return "", nil, fmt.Errorf("redis-server exited: %s", tail(string(log), 800))
		case <-ctx.Done():
			stop()
			return "", nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, errors.New("redis-server did not answer within 60s; see " + logFile)
		}
	}
	return "redis://" + addr + "/0", stop, nil
}

func redisPing(addr string) bool {
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

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
