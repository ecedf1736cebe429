package datafile

import (
	"fmt"
	"io"
	"sync"
)

// ReaderAt gives random access (io.ReaderAt, io.Seeker) over a sequential
// object reader, for Parquet readers that fetch only the footer and the
// column chunks they need: each read seeks, which on an object store is a
// new ranged request. Safe for concurrent use.
type ReaderAt struct {
	mu   sync.Mutex
	r    io.ReadSeeker
	size int64
	pos  int64 // Seek's position; ReadAt does not move it
}

// NewReaderAt wraps r, an object of size bytes.
func NewReaderAt(r io.ReadSeeker, size int64) *ReaderAt { return &ReaderAt{r: r, size: size} }

// ReadAt reads len(p) bytes at off.
func (b *ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if off >= b.size {
		return 0, io.EOF
	}
	if _, err := b.r.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	n, err := io.ReadFull(b.r, p)
	if err == io.ErrUnexpectedEOF {
		err = io.EOF
	}
	return n, err
}

// Seek moves the position Parquet readers use to find the footer.
func (b *ReaderAt) Seek(off int64, whence int) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch whence {
	case io.SeekStart:
		b.pos = off
	case io.SeekCurrent:
		b.pos += off
	case io.SeekEnd:
		b.pos = b.size + off
	}
	if b.pos < 0 {
		b.pos = 0
		return 0, fmt.Errorf("seek before the start")
	}
	return b.pos, nil
}
