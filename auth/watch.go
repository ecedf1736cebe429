package auth

import (
	"crypto/sha256"
	"os"
	"sync"
	"time"
)

// watcher polls a file and calls load with its contents whenever they
// change. Polling the contents (not fsnotify events or the mtime) also sees
// an atomic rename and a Kubernetes ConfigMap's symlink swap, and a change
// within the filesystem's mtime granularity.
type watcher struct {
	path     string
	interval time.Duration
	load     func([]byte) error
	onError  func(error)

	last [sha256.Size]byte
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// watchFile loads path once (its error is returned) and then polls it
// every interval until close. A later load error goes to onError and the
// previous contents stay in force.
func watchFile(path string, interval time.Duration, load func([]byte) error, onError func(error)) (*watcher, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := load(data); err != nil {
		return nil, err
	}
	w := &watcher{path: path, interval: interval, load: load, onError: onError,
		last: sha256.Sum256(data), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w, nil
}

func (w *watcher) run() {
	defer close(w.done)
	t := time.NewTicker(w.interval)
	defer t.Stop()
	// Report each failure once, not on every tick.
	var badSum [sha256.Size]byte
	var badContent, unreadable bool
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		data, err := os.ReadFile(w.path)
		if err != nil {
			// A rename in progress or a deleted file: keep what we have.
			if !unreadable {
				unreadable = true
				w.onError(err)
			}
			continue
		}
		unreadable = false
		sum := sha256.Sum256(data)
		if sum == w.last || (badContent && sum == badSum) {
			continue
		}
		if err := w.load(data); err != nil {
			badSum, badContent = sum, true
			w.onError(err)
			continue
		}
		w.last, badContent = sum, false
	}
}

func (w *watcher) close() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}
