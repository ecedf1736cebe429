package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mvq-dev/mvq/jobs"
)

// progress shows a job's progress: on a terminal one bar redrawn in place
// (work items done/total, rows read and written, rows/s, elapsed, ETA),
// elsewhere one plain line per event.
type progress struct {
	w       io.Writer
	tty     bool
	width   int
	id      string
	state   jobs.State
	phase   string
	p       jobs.Progress
	start   time.Time // when this command started following
	drawn   bool
	lastOut string
}

func newProgress(w io.Writer, tty bool, job *jobs.Job) *progress {
	p := &progress{w: w, tty: tty, width: terminalWidth(w), id: job.ID, state: job.State, phase: job.Phase, p: job.Progress, start: time.Now()}
	if job.StartedAt != nil && !job.StartedAt.IsZero() {
		p.start = *job.StartedAt
	}
	if !tty {
		fmt.Fprintf(w, "job %s %s %s\n", job.ID, job.State, dash(job.Phase))
	}
	p.draw()
	return p
}

func (p *progress) event(e jobs.Event) {
	if e.State == jobs.StateRunning && p.state != jobs.StateRunning {
		p.start = time.Now()
		if !e.Time.IsZero() {
			p.start = e.Time
		}
	}
	p.state, p.phase, p.p = e.State, e.Phase, e.Progress
	if !p.tty {
		line := fmt.Sprintf("%s %-9s %-10s %d/%d items, %d rows read, %d rows written", e.Time.Local().Format("15:04:05"), e.State, dash(e.Phase),
			e.Progress.WorkItemsDone, e.Progress.WorkItemsTotal, e.Progress.RowsRead, e.Progress.RowsWritten)
		if e.Message != "" {
			line += ": " + e.Message
		}
		fmt.Fprintln(p.w, line)
		return
	}
	p.draw()
}

// line is the bar's text for the current state.
func (p *progress) line() string {
	elapsed := time.Since(p.start)
	if p.state == jobs.StatePending {
		elapsed = 0
	}
	done, total := p.p.WorkItemsDone, p.p.WorkItemsTotal
	frac := 0.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	if p.state == jobs.StateDone {
		frac = 1
	}
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(p.p.RowsRead) / s
	}
	eta := "--:--"
	if done > 0 && total > done && p.phase == jobs.PhaseExpanding {
		eta = clock(time.Duration(float64(elapsed) * float64(total-done) / float64(done)))
	} else if total > 0 && done >= total {
		eta = "0:00"
	}
	phase := p.phase
	if phase == "" {
		phase = strings.ToLower(string(p.state))
	}
	stats := fmt.Sprintf(" %d/%d items  %s read  %s written  %s rows/s  %s  ETA %s",
		done, total, human(float64(p.p.RowsRead)), human(float64(p.p.RowsWritten)), human(rate), clock(elapsed), eta)
	barW := p.width - len(phase) - len(stats) - 4
	if barW > 40 {
		barW = 40
	}
	if barW < 10 {
		barW = 10
	}
	n := int(frac * float64(barW))
	bar := strings.Repeat("=", n)
	if n < barW {
		bar += ">" + strings.Repeat(" ", barW-n-1)
	}
	return fmt.Sprintf("%-10s [%s]%s", phase, bar, stats)
}

func (p *progress) draw() {
	if !p.tty {
		return
	}
	l := p.line()
	if r := []rune(l); len(r) > p.width-1 {
		l = string(r[:p.width-1])
	}
	fmt.Fprint(p.w, "\r\x1b[K"+l)
	p.drawn, p.lastOut = true, l
}

// clear removes the bar so a message can be printed on its line.
func (p *progress) clear() {
	if p.tty && p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

// finish draws the final bar and prints the job's outcome.
func (p *progress) finish(job *jobs.Job) {
	p.state, p.phase, p.p = job.State, job.Phase, job.Progress
	if p.tty {
		p.draw()
		fmt.Fprintln(p.w)
	}
	elapsed := time.Since(p.start)
	if job.StartedAt != nil && job.FinishedAt != nil {
		elapsed = job.FinishedAt.Sub(*job.StartedAt)
	}
	switch job.State {
	case jobs.StateDone:
		if r := job.Result; r != nil {
			fmt.Fprintf(p.w, "job %s DONE in %s: %s refresh, source v%d → view v%d, +%d rows, -%d rows\n",
				job.ID, elapsed.Round(time.Millisecond), r.Mode, r.SourceVersion, r.ViewVersion, r.RowsAdded, r.RowsRemoved)
		} else {
			fmt.Fprintf(p.w, "job %s DONE in %s\n", job.ID, elapsed.Round(time.Millisecond))
		}
	}
}

// human renders n with a k/M/G suffix.
func human(n float64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fG", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", n/1e6)
	case n >= 1e4:
		return fmt.Sprintf("%.1fk", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}

// clock renders d as m:ss (h:mm:ss past an hour).
func clock(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
