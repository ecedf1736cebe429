package warehouse

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
// What could make an unchanged mtime lie is excluded:
//   - Timestamps are coarse (the kernel stamps them from a clock that
//     ticks every few milliseconds): a change in the same tick as the
//     listing could keep the mtime the listing saw. A listing is kept only
//     when it began more than racyMargin after the mtime it saw (as a
//     stat before the read), so any later change gets a later mtime.
//   - Some local file systems keep whole seconds only (ext4 with 128-byte
//     inodes, ext2, ext3): a folder whose mtime and ctime both fall on a
//     whole second is read each time.
//   - Network file systems (NFS, SMB, FUSE mounts, …) cache attributes on
//     the client for seconds and stamp times with the server's clock: the
//     cache is used only on file systems known to be local
//     (localFileSystem), and only for folders on the warehouse root's
//     device (a mount below the root is read each time).
//
// Listings are kept under (folder, mtime, inode, ctime), so an entry never
// changes; a folder changed since is a new key and the old one ages out
// of the byte-bounded cache.
//
// The size and time of a file a caller stats after such a listing
// (StatListed: the latest version, on every accept) are kept under the
// listing's key and the name: a file removed, or written again under its
// name (a rename over it included), changes the folder, so a later read
// of the same key finds the same file. The stat is taken after the
// folder's stat that gave the key, so a change between the two is a
// change after the listing began and gets a new key. Files written in
// place (no rename, no new name) are not seen this way: the folders read
// so are _versions/ ones, whose manifests are written once.
const racyMargin = 100 * time.Millisecond

// dirListMaxBytes bounds the listings kept per warehouse, dirStatMaxBytes
// the file stats.
const (
	dirListMaxBytes = 4 << 20
	dirStatMaxBytes = 1 << 20
)

type dirKey struct {
	path  string
	mtime int64 // unix ns
	inode uint64
	ctime int64 // unix ns
}

// coarse reports whether the folder's times look like a file system's
// that keeps whole seconds: both on a whole second.
func (k dirKey) coarse() bool {
	return k.mtime%int64(time.Second) == 0 && k.ctime%int64(time.Second) == 0
}

// dirCache keeps listings of a local warehouse's folders; nil: none.
type dirCache struct {
	lists *lru.Cache[dirKey, []Entry]
	stats *lru.Cache[statKey, fileStat] // files stat'ed after a kept listing (StatListed)
	dev   uint64                        // the root's device: other devices are read each time
	now   func() time.Time
}

// Listed is the state of the folder a listing was read in (ListNamesAt):
// StatListed answers a file of it from the cache while the folder keeps
// that state. The zero Listed caches nothing.
type Listed struct {
	key  dirKey
	kept bool // the listing is the one kept under key
}

// Kept reports whether l is the state of a kept listing: while the
// folder keeps it, the listing is the folder's (a key for what callers
// derive from the listing alone).
func (l Listed) Kept() bool { return l.kept }

// statKey is a file of a folder in the state key.
type statKey struct {
	dir  dirKey
	name string
}

// fileStat is a file's size and time.
type fileStat struct {
	size  int64
	mtime time.Time
}

func newDirCache(root string) *dirCache {
	fi, err := os.Stat(root)
	if err != nil || !localFileSystem(root) {
		return nil
	}
	dev, _, _ := identityOf(fi)
	return &dirCache{lists: lru.New[dirKey, []Entry](dirListMaxBytes), stats: lru.New[statKey, fileStat](dirStatMaxBytes), dev: dev, now: time.Now}
}

// stat answers the size and time of file name in folder dir; ok is false
// when the file is gone.
func statIn(dir, name string) (size int64, mtime time.Time, ok bool, err error) {
	fi, err := os.Lstat(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, time.Time{}, false, nil
	}
	if err != nil {
		return 0, time.Time{}, false, err
	}
	return fi.Size(), fi.ModTime(), true, nil
}

// list answers read(path) from the cache when the folder has not changed
// since a listing it holds. A missing folder is no entries. The Listed is
// the folder's state when the listing is kept (else zero).
func (c *dirCache) list(path string, read func(string) ([]Entry, error)) ([]Entry, Listed, error) {
	if c == nil {
		entries, err := read(path)
		return entries, Listed{}, err
	}
	began := c.now()
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Listed{}, nil
	}
	if err != nil {
		entries, err := read(path) // its error, as a read answers it
		return entries, Listed{}, err
	}
	dev, inode, ctime := identityOf(fi)
	key := dirKey{path: path, mtime: fi.ModTime().UnixNano(), inode: inode, ctime: ctime}
	if dev != c.dev || key.coarse() {
		entries, err := read(path) // another device, or whole-second timestamps
		return entries, Listed{}, err
	}
	if entries, ok := c.lists.Get(key); ok {
		return entries, Listed{key: key, kept: true}, nil
	}
	entries, err := read(path)
	changed := max(key.mtime, key.ctime)
	if err != nil || began.UnixNano()-changed <= int64(racyMargin) {
		return entries, Listed{}, err
	}
	size := int64(64)
	for _, e := range entries {
		size += int64(len(e.Name)) + 64
	}
	c.lists.Put(key, entries, size)
	return entries, Listed{key: key, kept: true}, nil
}

// statListed is statIn for file name of folder dir listed at l: from the
// cache while l is a kept listing (see the top).
func (c *dirCache) statListed(l Listed, dir, name string) (size int64, mtime time.Time, ok bool, err error) {
	if c == nil || !l.kept || l.key.path != dir {
		return statIn(dir, name)
	}
	k := statKey{dir: l.key, name: name}
	if st, ok := c.stats.Get(k); ok {
		return st.size, st.mtime, true, nil
	}
	size, mtime, ok, err = statIn(dir, name)
	if ok && err == nil {
		c.stats.Put(k, fileStat{size: size, mtime: mtime}, int64(len(dir)+len(name))+64)
	}
	return size, mtime, ok, err
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
