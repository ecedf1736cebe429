package table

import (
	"fmt"
	"os"
	"syscall"
)

// storeETags are the ETags a client may have been told for the object at
// key besides its MD5 (which CreateVersionIf always accepts): on a
// file:// warehouse the Lance object store's local-file ETag, the inode,
// modification time and size in hex, with the time in microseconds or
// nanoseconds since the epoch.
func (t *Table) storeETags(key string) []string {
	if t.c.wh.Dir() == "" {
		return nil
	}
	fi, err := os.Stat(t.c.wh.Path(key))
	if err != nil {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	mt := fi.ModTime()
	return []string{
		fmt.Sprintf("%x-%x-%x", st.Ino, mt.UnixMicro(), fi.Size()),
		fmt.Sprintf("%x-%x-%x", st.Ino, mt.UnixNano(), fi.Size()),
	}
}
