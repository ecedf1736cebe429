package dataset

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Folder and file names inside a dataset folder.
const (
	VersionsDir     = "_versions"
	TransactionsDir = "_transactions"
	DeletionsDir    = "_deletions"
	DataDir         = "data"
	HintFile        = "latest_version_hint.json"
	manifestExt     = ".manifest"
)

// Scheme is how manifest files are named.
type Scheme int

const (
	// SchemeV1 names version v `_versions/{v}.manifest`.
	SchemeV1 Scheme = 1
	// SchemeV2 names version v `_versions/{u64max - v}.manifest`, zero-padded
	// to 20 digits, so that a lexical listing shows the latest first. LanceDB
	// 0.31 writes V2.
	SchemeV2 Scheme = 2
)

func (s Scheme) String() string {
	switch s {
	case SchemeV1:
		return "V1"
	case SchemeV2:
		return "V2"
	}
	return fmt.Sprintf("Scheme(%d)", int(s))
}

// ManifestName is the file name of version v's manifest in the scheme.
func ManifestName(s Scheme, v uint64) string {
	if s == SchemeV1 {
		return strconv.FormatUint(v, 10) + manifestExt
	}
	return fmt.Sprintf("%020d%s", math.MaxUint64-v, manifestExt)
}

// ParseManifestName returns the version and scheme of a manifest file name;
// ok is false for other names (temporary files, detached versions `d*`, the
// hint).
func ParseManifestName(name string) (v uint64, s Scheme, ok bool) {
	stem, found := strings.CutSuffix(name, manifestExt)
	if !found || stem == "" {
		return 0, 0, false
	}
	for _, c := range stem {
		if c < '0' || c > '9' {
			return 0, 0, false
		}
	}
	n, err := strconv.ParseUint(stem, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if len(stem) == 20 {
		return math.MaxUint64 - n, SchemeV2, true
	}
	// V1 names are plain decimals; a zero-padded one is not a name any
	// writer makes (and could alias another version's).
	if len(stem) > 1 && stem[0] == '0' {
		return 0, 0, false
	}
	return n, SchemeV1, true
}

// VersionFile is one manifest file of a dataset.
type VersionFile struct {
	Version uint64
	Scheme  Scheme
	Path    string // absolute or relative like the dataset folder given
	Size    int64
}

// ErrNotFound marks a dataset folder without manifests, or a version that
// does not exist.
var ErrNotFound = errors.New("lance dataset not found")

// ListVersions returns the dataset's manifest files, oldest first. A folder
// mixing V1 and V2 names is an error (LanceDB refuses it too).
func ListVersions(dir string) ([]VersionFile, error) {
	entries, err := os.ReadDir(filepath.Join(dir, VersionsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no %s folder", ErrNotFound, dir, VersionsDir)
	}
	if err != nil {
		return nil, err
	}
	var out []VersionFile
	var scheme Scheme
	for _, e := range entries {
		v, s, ok := ParseManifestName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if scheme != 0 && s != scheme {
			return nil, fmt.Errorf("%s mixes %s and %s manifest names", filepath.Join(dir, VersionsDir), scheme, s)
		}
		scheme = s
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		out = append(out, VersionFile{Version: v, Scheme: s, Path: filepath.Join(dir, VersionsDir, e.Name()), Size: info.Size()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Latest returns the dataset's newest manifest file; ErrNotFound when it has
// none. The listing decides, not the hint file (which can lag behind).
func Latest(dir string) (VersionFile, error) {
	vs, err := ListVersions(dir)
	if err != nil {
		return VersionFile{}, err
	}
	if len(vs) == 0 {
		return VersionFile{}, fmt.Errorf("%w: no manifest in %s", ErrNotFound, filepath.Join(dir, VersionsDir))
	}
	return vs[len(vs)-1], nil
}

// FindVersion returns version v's manifest file, trying both schemes;
// ErrNotFound when neither exists.
func FindVersion(dir string, v uint64) (VersionFile, error) {
	for _, s := range []Scheme{SchemeV2, SchemeV1} {
		p := filepath.Join(dir, VersionsDir, ManifestName(s, v))
		info, err := os.Stat(p)
		if err == nil && info.Mode().IsRegular() {
			return VersionFile{Version: v, Scheme: s, Path: p, Size: info.Size()}, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return VersionFile{}, err
		}
	}
	return VersionFile{}, fmt.Errorf("%w: version %d of %s", ErrNotFound, v, dir)
}

type hint struct {
	Version *uint64 `json:"version"`
}

// maxHintSize caps the hint file read.
const maxHintSize = 4096

// ReadHint returns the version in `_versions/latest_version_hint.json`
// (`{"version":N}`, which LanceDB 0.31 writes on local disks); ok is false
// when the file is absent. It is a hint: Latest lists the folder instead.
func ReadHint(dir string) (v uint64, ok bool, err error) {
	f, err := os.Open(filepath.Join(dir, VersionsDir, HintFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxHintSize+1))
	if err != nil {
		return 0, false, err
	}
	n := len(b)
	if n > maxHintSize {
		return 0, false, corrupt("%s is over %d bytes", HintFile, maxHintSize)
	}
	var h hint
	if err := json.Unmarshal(b[:n], &h); err != nil || h.Version == nil {
		return 0, false, corrupt("%s: %q is not {\"version\":N}", HintFile, b[:n])
	}
	return *h.Version, true, nil
}

// WriteHint replaces the hint file with version v, atomically (temporary
// file and rename).
func WriteHint(dir string, v uint64) error {
	b, _ := json.Marshal(hint{Version: &v})
	return replaceFile(filepath.Join(dir, VersionsDir, HintFile), b)
}
