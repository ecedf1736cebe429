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
type pool struct {
	mu   sync.Mutex
	idle []*proc
	max  int
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

func (p *pool) put(pr *proc) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) >= p.max {
		return false
	}
	p.idle = append(p.idle, pr)
	return true
}

func (p *pool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, pr := range idle {
		pr.kill()
	}
}

// poolKey names the pool of a runtime's command and environment: a
// manifest's env_vars start other processes.
func poolKey(s Settings) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%q\x00%s\x00%s\x00", s.Name, s.Command, s.Dir, s.Protocol)
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\x00", k, s.Env[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (m *Manager) pool(s Settings) (*pool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errors.New("udf: manager closed")
	}
	k := poolKey(s)
	p := m.pools[k]
	if p == nil {
		p = &pool{max: m.maxIdle}
		m.pools[k] = p
	}
	return p, nil
}

// environ is a subprocess's environment: PATH, HOME and LANG of this
// process, then env.
func environ(env map[string]string) []string {
	var out []string
	for _, k := range []string{"PATH", "HOME", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			if _, over := env[k]; !over {
				out = append(out, k+"="+v)
			}
		}
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
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
	pl, err := m.pool(s)
	if err != nil {
		return nil, err
	}
	p := pl.get()
	if p == nil {
		if p, err = m.start(s); err != nil {
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
		if s.Protocol == ProtocolArrow {
			a.rec, a.err = m.exchangeArrow(s, p, in, c.Mode)
		} else {
			a.rec, a.err = m.exchangeNDJSON(s, p, in, base, out, c.Mode)
		}
		done <- a
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
		return nil, failf(s.Name, false, "no answer within the timeout of %s; the process was killed", time.Duration(s.Timeout))
	case <-ctx.Done():
		p.kill()
		if r := <-done; r.rec != nil {
			r.rec.Release()
		}
		return nil, ctx.Err()
	}
	if a.err != nil {
		p.kill()
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
	if !pl.put(p) {
		p.kill()
	}
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
	var lines [][]byte
	var total int
	for {
		l, err := p.out.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			buf := append([]byte(nil), l...)
			for err == bufio.ErrBufferFull && len(buf) < maxLineBytes {
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
		if total > maxLineBytes*4 {
			return nil, failf(s.Name, true, "output of one batch exceeds %d bytes", maxLineBytes*4)
		}
		lines = append(lines, bytes.TrimSpace(l))
	}
	if err := <-werr; err != nil {
		return nil, err
	}
	return decodeRows(s.Name, mode, lines, int(in.NumRows()), base, out, m.Mem)
}

func (m *Manager) exchangeArrow(s Settings, p *proc, in arrow.RecordBatch, mode Mode) (arrow.RecordBatch, error) {
	werr := make(chan error, 1)
	go func() {
		w := ipc.NewWriter(p.stdin, ipc.WithSchema(in.Schema()), ipc.WithAllocator(m.Mem))
		if err := w.Write(in); err != nil {
			werr <- err
			return
		}
		werr <- w.Close()
	}()
	rd, err := ipc.NewReader(p.out, ipc.WithAllocator(m.Mem))
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
