package warehouse

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentPages is how many of path's pages are in the page cache, and
// how many pages it has (mincore(2) on a mapping of it).
func residentPages(t *testing.T, path string) (resident, pages int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	ps := os.Getpagesize()
	vec := make([]byte, (len(m)+ps-1)/ps)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident, len(vec)
}

// TestSyncDropBehind: SyncDropBehind makes a file durable and its pages
// leave the page cache, where Sync leaves them cached; the file reads
// back the same either way.
func TestSyncDropBehind(t *testing.T) {
	dir := t.TempDir()
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == 0x01021994 {
		t.Skip("the temporary folder is tmpfs, whose pages are the files themselves")
	}
	ctx := context.Background()
	w, err := Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	data := bytes.Repeat([]byte("drop behind "), 4<<20/12)
	for _, key := range []string{"kept", "dropped"} {
		if err := w.WriteFromUnsynced(ctx, key, func(wr io.Writer) error {
			_, err := wr.Write(data)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Sync([]string{"kept"}); err != nil {
		t.Fatal(err)
	}
	if err := w.SyncDropBehind([]string{"dropped"}); err != nil {
		t.Fatal(err)
	}
	kept, pages := residentPages(t, filepath.Join(dir, "kept"))
	dropped, _ := residentPages(t, filepath.Join(dir, "dropped"))
	t.Logf("%d pages each: %d cached after Sync, %d after SyncDropBehind", pages, kept, dropped)
	if kept < pages/2 {
		t.Errorf("Sync left %d of %d pages cached; the comparison needs a kernel that keeps written pages", kept, pages)
	}
	if dropped > pages/10 {
		t.Errorf("SyncDropBehind left %d of %d pages cached", dropped, pages)
	}
	for _, key := range []string{"kept", "dropped"} {
		got, err := w.Read(ctx, key)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s reads back %d bytes (%v), want the %d written", key, len(got), err, len(data))
		}
	}
}
