package warehouse

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mvq-dev/mvq/internal/lru"
)

// A refresh accept reads the _versions/ folders of the view and of its
// source to know their latest versions (latest.go). On a local file
// system a folder's mtime changes whenever a name is added to it or
// removed from it, so a listing taken while the folder had mtime M is the
// folder's listing as long as its mtime is still M: one stat instead of
// an open, a getdents and a close per folder.
//
// Two things could make an unchanged mtime lie, and both are excluded:
//   - Timestamps are coarse (the kernel stamps them from a clock that
//     ticks every few milliseconds): a change in the same tick as the
//     listing could keep the mtime the listing saw. A listing is kept only
//     when it began more than racyMargin after the mtime it saw (as a
//     stat before the read), so any later change gets a later mtime.
//   - Network file systems (NFS, SMB, FUSE mounts, …) cache attributes on
//     the client for seconds and stamp times with the server's clock: the
//     cache is used only on file systems known to be local
//     (localFileSystem), and every other folder is read each time.
//
// Listings are kept under (folder, mtime, inode, ctime), so an entry never
// changes; a folder changed since is a new key and the old one ages out
// of the byte-bounded cache.
const racyMargin = 100 * time.Millisecond

// dirListMaxBytes bounds the listings kept per warehouse.
const dirListMaxBytes = 4 << 20

type dirKey struct {
	path  string
	mtime int64 // unix ns
	inode uint64
	ctime int64 // unix ns
}

// dirCache keeps listings of a local warehouse's folders, and the sizes
// and times of files in them; nil: none.
type dirCache struct {
	lists *lru.Cache[dirKey, []Entry]
	// stats are files' sizes and times by the key their folder had when
	// they were stat'ed: a version file is never changed in place, and
	// one removed changes its folder's key.
	stats *lru.Cache[fileKey, fileStat]
	now   func() time.Time

	mu sync.Mutex
	// seen is each folder's key at its latest listing (dropped whole
	// past seenMax folders: it only saves a stat).
	seen map[string]dirKey
}

type fileKey struct {
	dir  dirKey
	name string
}

type fileStat struct {
	size  int64
	mtime time.Time
}

const seenMax = 1 << 14

func newDirCache(root string) *dirCache {
	if !localFileSystem(root) {
		return nil
	}
	return &dirCache{lists: lru.New[dirKey, []Entry](dirListMaxBytes), stats: lru.New[fileKey, fileStat](dirListMaxBytes),
		now: time.Now, seen: map[string]dirKey{}}
}

// stat answers the size and time of file name in folder dir, from the
// cache when the folder is as its latest listing saw it and the file was
// stat'ed then; ok is false when the file is gone. A file removed since
// that listing may still be answered, as it would be had it been removed
// just after a stat.
func (c *dirCache) stat(dir, name string) (fileStat, bool, error) {
	stat := func() (fileStat, bool, error) {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return fileStat{}, false, nil
		}
		if err != nil {
			return fileStat{}, false, err
		}
		return fileStat{size: fi.Size(), mtime: fi.ModTime()}, true, nil
	}
	if c == nil {
		return stat()
	}
	c.mu.Lock()
	key, listed := c.seen[dir]
	c.mu.Unlock()
	if !listed {
		return stat()
	}
	fk := fileKey{dir: key, name: name}
	if st, ok := c.stats.Get(fk); ok {
		return st, true, nil
	}
	st, ok, err := stat()
	if ok {
		c.stats.Put(fk, st, int64(len(name))+96)
	}
	return st, ok, err
}

// list answers read(path) from the cache when the folder has not changed
// since a listing it holds. A missing folder is no entries.
func (c *dirCache) list(path string, read func(string) ([]Entry, error)) ([]Entry, error) {
	if c == nil {
		return read(path)
	}
	began := c.now()
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return read(path) // its error, as a read answers it
	}
	key := dirKey{path: path, mtime: fi.ModTime().UnixNano()}
	key.inode, key.ctime = identityOf(fi)
	if entries, ok := c.lists.Get(key); ok {
		c.saw(path, key)
		return entries, nil
	}
	entries, err := read(path)
	changed := max(key.mtime, key.ctime)
	if err != nil || began.UnixNano()-changed <= int64(racyMargin) {
		return entries, err
	}
	c.saw(path, key)
	size := int64(64)
	for _, e := range entries {
		size += int64(len(e.Name)) + 64
	}
	c.lists.Put(key, entries, size)
	return entries, nil
}

// saw notes key as folder path's key at its latest listing (one that may
// be kept: past the racy margin).
func (c *dirCache) saw(path string, key dirKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) >= seenMax {
		clear(c.seen)
	}
	c.seen[path] = key
}

// readNames reads a folder's names: entries carry no size or time. As
// List, it skips hidden names (and fileblob's sidecar attribute files)
// and answers a missing folder with no entries. Callers must not change
// the slice (a cached listing is shared).
func readNames(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	des, err := f.ReadDir(-1) // unsorted: callers order what they keep
	f.Close()
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(des))
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".attrs") {
			continue
		}
		out = append(out, Entry{Name: name, IsDir: de.IsDir()})
	}
	return out, nil
}
