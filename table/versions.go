package table

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"strings"
)

// CreateVersion publishes a manifest the client staged inside the table
// folder (manifestPath, relative to it) as version v under scheme, with
// put-if-not-exists. The staged manifest must parse, carry version v and
// reference only data files that exist. v must be latest+1: an existing
// version is a conflict, a gap is invalid input. metadata, when given,
// replaces the version's metadata. An existing version is checked first.
// It returns the new version file, its
// manifest and the bytes written.
func (t *Table) CreateVersion(ctx context.Context, v uint64, manifestPath string, scheme NamingScheme, metadata map[string]string) (VersionFile, *Manifest, []byte, error) {
	// Put-if-not-exists: an existing version is a conflict whatever else
	// is wrong with the request, so a client retrying a commit whose
	// staged manifest was cleaned up learns that the version exists.
	if _, err := t.Version(ctx, v); err == nil {
		return VersionFile{}, nil, nil, Errorf(CodeConcurrentModification, "version %d already exists", v)
	} else if ErrorCode(err) != CodeTableVersionNotFound {
		return VersionFile{}, nil, nil, err
	}
	switch scheme {
	case NamingV1, NamingV2:
	default:
		return VersionFile{}, nil, nil, Errorf(CodeInvalidInput, "naming_scheme: %q is not V1 or V2", scheme)
	}
	if v == 0 {
		return VersionFile{}, nil, nil, Errorf(CodeInvalidInput, "version: versions start at 1")
	}
	if scheme == NamingV1 && v >= 1e19 {
		return VersionFile{}, nil, nil, Errorf(CodeInvalidInput, "version: too large for V1 naming")
	}
	rel := strings.TrimPrefix(manifestPath, t.Location()+"/")
	clean := path.Clean(rel)
	if rel == "" || path.IsAbs(rel) || clean != rel || strings.HasPrefix(clean, "..") || strings.HasPrefix(clean, versionsDir) {
		return VersionFile{}, nil, nil, Errorf(CodeInvalidInput, "manifest_path: %q must be a clean path inside the table folder, outside _versions/", manifestPath)
	}
	data, err := t.c.wh.Read(ctx, t.key+clean)
	if errors.Is(err, os.ErrNotExist) {
		return VersionFile{}, nil, nil, Errorf(CodeInvalidInput, "manifest_path: %q does not exist", manifestPath)
	}
	if err != nil {
		return VersionFile{}, nil, nil, err
	}
	m, err := DecodeManifest(data)
	if err != nil {
		return VersionFile{}, nil, nil, Errorf(CodeInvalidInput, "manifest_path: %v", err)
	}
	if m.Version != v {
		return VersionFile{}, nil, nil, Errorf(CodeInvalidInput, "manifest_path: manifest carries version %d, request says %d", m.Version, v)
	}
	if s, err := decodeSchema(m.Schema); err != nil {
		return VersionFile{}, nil, nil, Errorf(CodeInvalidInput, "manifest_path: %v", err)
	} else if err := checkSchema(s); err != nil {
		return VersionFile{}, nil, nil, Errorf(CodeInvalidInput, "manifest_path: %v", err)
	}
	for _, f := range m.Fragments {
		ok, err := t.c.wh.Exists(ctx, t.key+f.Path)
		if err != nil {
			return VersionFile{}, nil, nil, err
		}
		if !ok {
			return VersionFile{}, nil, nil, Errorf(CodeInvalidInput, "manifest_path: fragment %d file %s does not exist", f.ID, f.Path)
		}
	}
	latest, err := t.LatestVersion(ctx)
	if err != nil {
		return VersionFile{}, nil, nil, err
	}
	cur, err := t.readManifest(ctx, latest)
	if err != nil {
		return VersionFile{}, nil, nil, err
	}
	if cur.IsView() {
		return VersionFile{}, nil, nil, refuseView(t.id, "version create")
	}
	if cur.IsExternal() || m.IsExternal() {
		return VersionFile{}, nil, nil, refuseExternal(t.id, "version create")
	}
	if v <= latest.Version {
		return VersionFile{}, nil, nil, Errorf(CodeConcurrentModification, "version %d already exists", v)
	}
	if v > latest.Version+1 {
		return VersionFile{}, nil, nil, Errorf(CodeInvalidInput, "version: %d would leave a gap after the latest version %d", v, latest.Version)
	}
	// The table keeps its identity whatever the staged manifest says.
	if metadata != nil || m.UUID != cur.UUID {
		if metadata != nil {
			m.Metadata = metadata
		}
		m.UUID = cur.UUID
		if data, err = m.Encode(); err != nil {
			return VersionFile{}, nil, nil, err
		}
	}
	name := ManifestName(v, scheme)
	// The version must not exist under the other scheme's name either.
	other := NamingV1
	if scheme == NamingV1 {
		other = NamingV2
	}
	if v < math.MaxUint64 {
		if ok, _ := t.c.wh.Exists(ctx, t.key+versionsDir+ManifestName(v, other)); ok {
			return VersionFile{}, nil, nil, Errorf(CodeConcurrentModification, "version %d already exists", v)
		}
	}
	err = t.c.wh.PutIfNotExists(ctx, t.key+versionsDir+name, data)
	if errors.Is(err, ErrExists) {
		return VersionFile{}, nil, nil, Errorf(CodeConcurrentModification, "version %d already exists", v)
	}
	if err != nil {
		return VersionFile{}, nil, nil, fmt.Errorf("create version %d: %w", v, err)
	}
	t.c.committed(ctx, t.id, m)
	return VersionFile{Version: v, Scheme: scheme, Name: name, Size: int64(len(data))}, m, data, nil
}
