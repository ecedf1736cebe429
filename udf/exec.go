package udf

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/mvq-dev/mvq/arrowjson"
)

// maxLineBytes bounds one NDJSON output line of a subprocess.
const maxLineBytes = 64 << 20

// proc is one running subprocess of an exec runtime.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	exited chan struct{}
	mu     sync.Mutex
	events *eventCap // where stderr lines go now
	// idleSince: when it went back to its pool (under the pool's mu).
	idleSince time.Time
}

func (p *proc) setEvents(e *eventCap) {
	p.mu.Lock()
	p.events = e
	p.mu.Unlock()
}

func (p *proc) stderrLine(s string) {
	p.mu.Lock()
	e := p.events
	p.mu.Unlock()
	e.line(s)
}

// exitStatus waits a little for the process to end and says how it did.
func (p *proc) exitStatus() string {
	select {
	case <-p.exited:
		return "it exited (" + p.cmd.ProcessState.String() + ")"
	case <-time.After(2 * time.Second):
		return "it is still running"
	}
}

func (p *proc) kill() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		_ = p.cmd.Process.Kill()
	}
	_ = p.stdin.Close()
	<-p.exited
}

// pool holds the idle subprocesses of one runtime and environment.
// busy counts the calls using it; a closed pool (evicted, or the manager
// closed) takes no process back.
type pool struct {
	key, runtime string
	max          int

	mu       sync.Mutex
	idle     []*proc
	busy     int
	lastUsed time.Time
	closed   bool
}

func (p *pool) get() *proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > 0 {
		pr := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		select {
		case <-pr.exited:
			continue // died while idle
		default:
			return pr
		}
	}
	return nil
}

// release ends one use of the pool: pr (nil when none was started or it
// was killed already) is kept idle when reuse is set and there is room,
// else killed.
func (p *pool) release(pr *proc, reuse bool) {
	p.mu.Lock()
	p.busy--
	p.lastUsed = time.Now()
	keep := pr != nil && reuse && !p.closed && len(p.idle) < p.max
	if keep {
		pr.idleSince = p.lastUsed
		p.idle = append(p.idle, pr)
	}
	p.mu.Unlock()
	if pr != nil && !keep {
		pr.kill()
	}
}

// closeLocked marks p closed and answers its idle processes to kill; p.mu
// must be held.
func (p *pool) closeLocked() []*proc {
	p.closed = true
	idle := p.idle
	p.idle = nil
	return idle
}

func (p *pool) close() {
	p.mu.Lock()
	idle := p.closeLocked()
	p.mu.Unlock()
	killAll(idle)
}

func killAll(ps []*proc) {
	for _, pr := range ps {
		pr.kill()
	}
}

// poolKey names the pool of a runtime's command and environment: a
// manifest's env_vars start other processes.
func poolKey(s Settings) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%q\x00%s\x00%s\x00", s.Name, s.Command, s.Dir, s.Protocol)
	for _, k := range sortedKeys(s.Env) {
		fmt.Fprintf(h, "%s=%s\x00", k, s.Env[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// acquire answers the pool of s with one use counted (end it with
// release). A new pool may push its runtime past MaxPools: the least
// recently used pools without a call in progress are closed then.
func (m *Manager) acquire(s Settings) (*pool, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errors.New("udf: manager closed")
	}
	k := poolKey(s)
	p := m.pools[k]
	fresh := p == nil
	if fresh {
		p = &pool{key: k, runtime: s.Name, max: m.maxIdle}
		m.pools[k] = p
		m.startJanitorLocked()
	}
	p.mu.Lock()
	p.busy++
	p.lastUsed = time.Now()
	p.mu.Unlock()
	var kill []*proc
	if fresh {
		kill = m.sweepLocked(time.Now())
	}
	m.mu.Unlock()
	killAll(kill)
	return p, nil
}

// sweepLocked closes what has been idle for IdleTimeout (processes, and
// pools without processes or calls), then, per runtime, the least
// recently used pools without calls in progress past MaxPools. It answers
// the processes to kill (after m.mu is released); m.mu must be held.
func (m *Manager) sweepLocked(now time.Time) []*proc {
	var kill []*proc
	type use struct {
		p    *pool
		last time.Time
	}
	byRuntime := map[string][]use{}
	for k, p := range m.pools {
		p.mu.Lock()
		keep := p.idle[:0]
		for _, pr := range p.idle {
			if now.Sub(pr.idleSince) >= m.IdleTimeout {
				kill = append(kill, pr)
			} else {
				keep = append(keep, pr)
			}
		}
		clear(p.idle[len(keep):])
		p.idle = keep
		if p.busy == 0 && len(p.idle) == 0 && now.Sub(p.lastUsed) >= m.IdleTimeout {
			p.closeLocked()
			delete(m.pools, k)
		} else {
			byRuntime[p.runtime] = append(byRuntime[p.runtime], use{p, p.lastUsed})
		}
		p.mu.Unlock()
	}
	for _, ps := range byRuntime {
		excess := len(ps) - max(m.MaxPools, 1)
		if excess <= 0 {
			continue
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i].last.Before(ps[j].last) })
		for _, u := range ps {
			if excess == 0 {
				break
			}
			p := u.p
			p.mu.Lock()
			if p.busy == 0 {
				kill = append(kill, p.closeLocked()...)
				delete(m.pools, p.key)
				excess--
			}
			p.mu.Unlock()
		}
	}
	return kill
}

// startJanitorLocked starts the goroutine that sweeps the pools every
// quarter of IdleTimeout, once; Close stops it. m.mu must be held.
func (m *Manager) startJanitorLocked() {
	if m.stopJanitor != nil {
		return
	}
	stop := make(chan struct{})
	m.stopJanitor = stop
	every := max(m.IdleTimeout/4, 10*time.Millisecond)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				m.mu.Lock()
				kill := m.sweepLocked(now)
				m.mu.Unlock()
				killAll(kill)
			}
		}
	}()
}

// poolCounts answers the pools of runtime name and their idle processes.
func (m *Manager) poolCounts(name string) (pools, idle int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.pools {
		if p.runtime != name {
			continue
		}
		pools++
		p.mu.Lock()
		idle += len(p.idle)
		p.mu.Unlock()
	}
	return pools, idle
}

// environ is a subprocess's environment: PATH, HOME and LANG of this
// process, then env (checked by the caller: only names the runtime
// allows, never PATH or HOME).
func environ(env map[string]string) []string {
	var out []string
	for _, k := range []string{"PATH", "HOME", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			if _, over := env[k]; !over {
				out = append(out, k+"="+v)
			}
		}
	}
	for _, k := range sortedKeys(env) {
		out = append(out, k+"="+env[k])
	}
	return out
}

func (m *Manager) start(s Settings) (*proc, error) {
	cmd := exec.Command(s.Command[0], s.Command[1:]...)
	cmd.Dir = s.Dir
	cmd.Env = environ(s.Env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, failf(s.Name, true, "cannot start %q: %v", s.Command[0], err)
	}
	p := &proc{cmd: cmd, stdin: stdin, out: bufio.NewReaderSize(stdout, 1<<16), exited: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 0, 4096), 1<<20)
		for sc.Scan() {
			p.stderrLine(sc.Text())
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		wg.Wait()
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// execBatch sends one batch to a pooled subprocess and reads its answer
// within the timeout. On any failure the process is killed, not pooled.
func (m *Manager) execBatch(ctx context.Context, c Call, in arrow.RecordBatch, base int64, out *arrow.Schema, ev *eventCap) (arrow.RecordBatch, error) {
	s := c.Settings
	// Defense in depth: the refresh engine resolved s from the runtimes
	// file, which allows these names; check again before they reach a
	// process.
	if err := s.Runtime.CheckEnv(s.Env); err != nil {
		return nil, failf(s.Name, true, "manifest: %v", err)
	}
	pl, err := m.acquire(s)
	if err != nil {
		return nil, err
	}
	p := pl.get()
	if p == nil {
		if p, err = m.start(s); err != nil {
			pl.release(nil, false)
			return nil, err
		}
	}
	p.setEvents(ev)
	type answer struct {
		rec arrow.RecordBatch
		err error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		defer func() {
			// Whatever the output makes the decoders do, a panic here
			// fails this call, not the worker.
			if r := recover(); r != nil {
				a = answer{err: failf(s.Name, true, "reading the output failed: %v", r)}
			}
			done <- a
		}()
		if s.Protocol == ProtocolArrow {
			a.rec, a.err = m.exchangeArrow(s, p, in, c.Mode)
		} else {
			a.rec, a.err = m.exchangeNDJSON(s, p, in, base, out, c.Mode)
		}
	}()
	timer := time.NewTimer(time.Duration(s.Timeout))
	defer timer.Stop()
	var a answer
	select {
	case a = <-done:
	case <-timer.C:
		p.kill()
		if r := <-done; r.rec != nil {
			r.rec.Release()
		}
		pl.release(nil, false) // killed already
		return nil, &Error{Runtime: s.Name, Timeout: time.Duration(s.Timeout),
			Msg: fmt.Sprintf("no answer within the timeout of %s (the runtime's timeout, or the manifest's lower mvq.timeout); the process was killed", time.Duration(s.Timeout))}
	case <-ctx.Done():
		p.kill()
		if r := <-done; r.rec != nil {
			r.rec.Release()
		}
		pl.release(nil, false) // killed already
		return nil, ctx.Err()
	}
	if a.err != nil {
		p.kill()
		pl.release(nil, false) // killed already
		var ue *Error
		if !errors.As(a.err, &ue) {
			select {
			case <-p.exited:
				a.err = &Error{Runtime: s.Name, Msg: fmt.Sprintf("the process exited (%v)", p.cmd.ProcessState), Permanent: true, Err: a.err}
			default:
				a.err = &Error{Runtime: s.Name, Msg: "talking to the process failed", Permanent: true, Err: a.err}
			}
		}
		return nil, a.err
	}
	// stderr read after the answer still goes to this call's events,
	// until the next call takes the process.
	pl.release(p, true)
	return a.rec, nil
}

var endLine = []byte(`{"__end":true}`)

func isEnd(l []byte) bool {
	l = bytes.TrimSpace(l)
	if bytes.Equal(l, endLine) {
		return true
	}
	return bytes.HasPrefix(l, []byte(`{"__end"`)) && bytes.Equal(bytes.ReplaceAll(l, []byte(" "), nil), endLine)
}

func (m *Manager) exchangeNDJSON(s Settings, p *proc, in arrow.RecordBatch, base int64, out *arrow.Schema, mode Mode) (arrow.RecordBatch, error) {
	rows, err := inputRows(in, base)
	if err != nil {
		return nil, err
	}
	werr := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(p.stdin, 1<<16)
		for _, r := range rows {
			if _, err := w.Write(append(r, '\n')); err != nil {
				werr <- err
				return
			}
		}
		if _, err := w.Write(append(endLine, '\n')); err != nil {
			werr <- err
			return
		}
		werr <- w.Flush()
	}()
	limit := s.MaxOutputBytes
	if limit <= 0 {
		limit = DefaultMaxOutputBytes
	}
	var lines [][]byte
	var total int
	for {
		l, err := p.out.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			buf := append([]byte(nil), l...)
			for err == bufio.ErrBufferFull && int64(len(buf)) <= min(maxLineBytes, limit) {
				l, err = p.out.ReadSlice('\n')
				buf = append(buf, l...)
			}
			l = buf
		} else {
			l = append([]byte(nil), l...)
		}
		if err != nil {
			if len(bytes.TrimSpace(l)) > 0 {
				return nil, failf(s.Name, true, "output ended inside a line (%v): first bad line %s", err, clip(l))
			}
			return nil, failf(s.Name, true, "the process closed its output before {\"__end\": true}: %s", p.exitStatus())
		}
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		if isEnd(l) {
			break
		}
		total += len(l)
		if int64(total) > limit {
			return nil, failf(s.Name, true, "output of one batch exceeds max_output_bytes (%d bytes)", limit)
		}
		lines = append(lines, bytes.TrimSpace(l))
	}
	if err := <-werr; err != nil {
		return nil, err
	}
	return decodeRows(s.Name, mode, lines, int(in.NumRows()), base, out, m.Mem)
}

// exchangeArrow writes in as one IPC stream and reads one stream back:
// at most MaxOutputBytes, every message's metadata verified before it is
// used and every batch validated in full (arrowjson.ReadIPC).
func (m *Manager) exchangeArrow(s Settings, p *proc, in arrow.RecordBatch, mode Mode) (arrow.RecordBatch, error) {
	werr := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				werr <- fmt.Errorf("writing the input: %v", r)
			}
		}()
		w := ipc.NewWriter(p.stdin, ipc.WithSchema(in.Schema()), ipc.WithAllocator(m.Mem))
		if err := w.Write(in); err != nil {
			werr <- err
			return
		}
		werr <- w.Close()
	}()
	limit := s.MaxOutputBytes
	if limit <= 0 {
		limit = DefaultMaxOutputBytes
	}
	data, err := arrowjson.ReadIPCStreamBytes(p.out, limit)
	if errors.Is(err, arrowjson.ErrStreamTooLarge) {
		return nil, failf(s.Name, true, "output of one batch exceeds max_output_bytes (%d bytes)", limit)
	}
	if err != nil {
		var ie *arrowjson.IPCError
		if errors.As(err, &ie) {
			return nil, failf(s.Name, true, "output is not an Arrow IPC stream: %v", err)
		}
		return nil, failf(s.Name, true, "the process closed its output before the end of its Arrow IPC stream (%v): %s", err, p.exitStatus())
	}
	rd, err := arrowjson.ReadIPC(data, m.Mem, limit)
	if err != nil {
		return nil, failf(s.Name, true, "output is not an Arrow IPC stream: %v", err)
	}
	defer rd.Release()
	var recs []arrow.RecordBatch
	for rd.Next() {
		r := rd.RecordBatch()
		r.Retain()
		recs = append(recs, r)
	}
	if err := rd.Err(); err != nil {
		releaseAll(recs)
		return nil, failf(s.Name, true, "output is not an Arrow IPC stream: %v", err)
	}
	if err := <-werr; err != nil {
		releaseAll(recs)
		return nil, err
	}
	defer releaseAll(recs)
	return concat(m.Mem, rd.Schema(), recs)
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}
