package warehouse

import (
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Local file systems by statfs(2) f_type: their folders' mtimes are
// stamped by this kernel on every change of the folder's names.
var localFSTypes = map[int64]bool{
	0xEF53:     true, // ext2, ext3, ext4
	0x58465342: true, // xfs
	0x9123683E: true, // btrfs
	0x01021994: true, // tmpfs
	0x794C7630: true, // overlayfs (container layers)
	0x2FC12FC1: true, // zfs
	0xF2F52010: true, // f2fs
}

func localFileSystem(dir string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false
	}
	return localFSTypes[int64(st.Type)]
}

// identityOf is a folder's device, inode and ctime: the ctime changes
// with every change of the folder that its mtime shows and cannot be set
// back (a utimes to an old mtime is itself a change), and a folder made
// again may reuse the inode but not the ctime.
func identityOf(fi fs.FileInfo) (dev, inode uint64, ctime int64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), st.Ino, st.Ctim.Nano()
	}
	return 0, 0, 0
}

// dropCached asks the kernel to drop f's clean pages from its page cache
// (posix_fadvise DONTNEED); it is advice, so a failure changes nothing.
func dropCached(f *os.File) {
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}
