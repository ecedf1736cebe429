package dataset

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrExists is returned by createFile (and so by Commit, wrapped in
// ErrConflict) when the target already exists.
var ErrExists = fs.ErrExist

func tempName(path string) (string, error) {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(path), ".tmp_"+filepath.Base(path)+"_"+hex.EncodeToString(r[:])), nil
}

func writeTemp(path string, b []byte) (string, error) {
	tmp, err := tempName(path)
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(tmp)
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// createFile writes b to path only if path does not exist, so that of two
// writers racing for the same name exactly one wins, and a reader never sees
// a partial file: the bytes go to a temporary file in the same folder, which
// is then hard-linked to path (a link never replaces an existing name) and
// unlinked. When path exists the error wraps fs.ErrExist.
func createFile(path string, b []byte) error {
	tmp, err := writeTemp(path, b)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", path, fs.ErrExist)
		}
		return err
	}
	return syncDir(filepath.Dir(path))
}

// replaceFile writes b to path atomically, replacing what is there.
func replaceFile(path string, b []byte) error {
	tmp, err := writeTemp(path, b)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	// Some filesystems refuse to sync a directory; the link is made either way.
	_ = d.Sync()
	return nil
}
