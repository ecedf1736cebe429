package iceberg

import (
	"errors"
	"io"
	"io/fs"
	"os"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/mvq-dev/mvq/errs"
	// s3:// locations; credentials, region and endpoint come from the
	// AWS_* environment (AWS_S3_ENDPOINT for an S3-compatible server).
	_ "github.com/apache/iceberg-go/io/gocloud/s3"
)

// guardFS is the file system Iceberg metadata, manifests, data and delete
// files are read through: every name must lie within a location the
// table's namespace may read (a metadata file may name any path, and a
// crafted one could point at the warehouse of another tenant or at /etc),
// local files are opened so that no symbolic link leads out of those
// locations (openLocal), and nothing is removed.
type guardFS struct {
	inner   iceio.IO
	allowed Allowed
	ns      []string
}

var errReadOnly = errors.New("external tables are read only")

func (g guardFS) check(op, name string) error {
	if err := g.allowed.Check(g.ns, "file", name); err != nil {
		return &fs.PathError{Op: op, Path: name, Err: err}
	}
	return nil
}

// local opens name when it is a local file: ok is false for other schemes.
func (g guardFS) local(op, name string) (f *os.File, ok bool, err error) {
	l, err := ParseLocation(name)
	if err != nil || l.Scheme != "file" {
		return nil, false, nil
	}
	f, err = openLocal(g.allowed.For(g.ns), l)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			err = errs.Errorf(errs.CodePermissionDenied, "file %s: %v", l, err)
		}
		return nil, true, &fs.PathError{Op: op, Path: name, Err: err}
	}
	return f, true, nil
}

func (g guardFS) Open(name string) (iceio.File, error) {
	if err := g.check("open", name); err != nil {
		return nil, err
	}
	if f, ok, err := g.local("open", name); ok {
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	return g.inner.Open(name)
}

func (g guardFS) ReadFile(name string) ([]byte, error) {
	if err := g.check("read", name); err != nil {
		return nil, err
	}
	if f, ok, err := g.local("read", name); ok {
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(f)
	}
	if rf, ok := g.inner.(iceio.ReadFileIO); ok {
		return rf.ReadFile(name)
	}
	f, err := g.inner.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, st.Size())
	if _, err := f.ReadAt(buf, 0); err != nil {
		return nil, err
	}
	return buf, nil
}

func (g guardFS) Remove(name string) error {
	return &fs.PathError{Op: "remove", Path: name, Err: errReadOnly}
}
