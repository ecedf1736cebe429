package dataset

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/mvq-dev/mvq/lance/pb/tablepb"
)

// The manifest file footer: u64 manifest position, u16 major, u16 minor,
// then the magic.
const (
	footerSize = 16
	magic      = "LANC"
)

// The footer version LanceDB 0.31 writes into manifest files (0.2). Readers
// accept any footer version: the manifest protobuf carries the meaning.
const (
	ManifestMajor uint16 = 0
	ManifestMinor uint16 = 2
)

// MaxManifestSize caps the manifest files this package reads (and so the
// memory one read takes).
const MaxManifestSize = 256 << 20

// ErrCorrupt marks bytes that are not a valid Lance manifest, deletion file
// or transaction file; errors.Is(err, ErrCorrupt) holds for them.
var ErrCorrupt = errors.New("corrupt lance metadata")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// ManifestFile is the content of one manifest file (`_versions/*.manifest`):
// the manifest, and the optional sections it points at.
type ManifestFile struct {
	Manifest *tablepb.Manifest
	// Transaction is the inline transaction section (the manifest's
	// transaction_section), nil when absent. Writers that also write a
	// `_transactions/` file name it in Manifest.TransactionFile.
	Transaction *tablepb.Transaction
	// Indices is the index section (the manifest's index_section), nil when
	// absent.
	Indices *tablepb.IndexSection
	// Major and Minor are the footer's version numbers.
	Major, Minor uint16
}

// readSection decodes the `[u32 len][message]` at pos of b, which must end
// at or before limit.
func readSection(b []byte, pos uint64, limit int, what string, m proto.Message) error {
	if pos > uint64(limit) || uint64(limit)-pos < 4 {
		return corrupt("%s position %d outside the file (limit %d)", what, pos, limit)
	}
	n := binary.LittleEndian.Uint32(b[pos:])
	start := pos + 4
	if uint64(n) > uint64(limit)-start {
		return corrupt("%s of %d bytes at %d runs past %d", what, n, pos, limit)
	}
	if err := proto.Unmarshal(b[start:start+uint64(n)], m); err != nil {
		return corrupt("%s: %v", what, err)
	}
	return nil
}

// DecodeManifest parses a manifest file. Any byte sequence gives either a
// ManifestFile or an error wrapping ErrCorrupt; it never panics. Feature
// flags are not checked here (see CheckReaderFlags).
func DecodeManifest(b []byte) (*ManifestFile, error) {
	if len(b) > MaxManifestSize {
		return nil, corrupt("manifest file of %d bytes is over the %d byte limit", len(b), MaxManifestSize)
	}
	if len(b) < footerSize+4 {
		return nil, corrupt("manifest file of %d bytes is too small", len(b))
	}
	foot := b[len(b)-footerSize:]
	if string(foot[12:]) != magic {
		return nil, corrupt("manifest file does not end in %q", magic)
	}
	pos := binary.LittleEndian.Uint64(foot)
	body := len(b) - footerSize
	mf := &ManifestFile{
		Major: binary.LittleEndian.Uint16(foot[8:]),
		Minor: binary.LittleEndian.Uint16(foot[10:]),
	}
	// The manifest is the last message: it ends where the footer starts.
	if pos > uint64(body) || uint64(body)-pos < 4 {
		return nil, corrupt("manifest position %d outside the file", pos)
	}
	if n := binary.LittleEndian.Uint32(b[pos:]); uint64(n) != uint64(body)-pos-4 {
		return nil, corrupt("manifest length %d does not reach the footer (%d bytes there)", n, uint64(body)-pos-4)
	}
	mf.Manifest = &tablepb.Manifest{}
	if err := readSection(b, pos, body, "manifest", mf.Manifest); err != nil {
		return nil, err
	}
	m := mf.Manifest
	if m.IndexSection != nil {
		mf.Indices = &tablepb.IndexSection{}
		if err := readSection(b, m.GetIndexSection(), int(pos), "index section", mf.Indices); err != nil {
			return nil, err
		}
	}
	if m.TransactionSection != nil {
		mf.Transaction = &tablepb.Transaction{}
		if err := readSection(b, m.GetTransactionSection(), int(pos), "transaction section", mf.Transaction); err != nil {
			return nil, err
		}
	}
	return mf, nil
}

func appendSection(b []byte, m proto.Message) ([]byte, error) {
	msg, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	if uint64(len(msg)) > 1<<32-1 {
		return nil, fmt.Errorf("message of %d bytes does not fit a u32 length", len(msg))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(msg)))
	return append(b, msg...), nil
}

// EncodeManifest writes a manifest file the way LanceDB does: the inline
// transaction (when Transaction is set), the index section (when Indices is
// set), the manifest, and the footer with version 0.2. It sets the
// manifest's transaction_section and index_section to where those sections
// land (clearing them when absent); it does not change mf otherwise.
func EncodeManifest(mf *ManifestFile) ([]byte, error) {
	if mf == nil || mf.Manifest == nil {
		return nil, errors.New("encode manifest: no manifest")
	}
	m := proto.Clone(mf.Manifest).(*tablepb.Manifest)
	m.TransactionSection, m.IndexSection = nil, nil
	var b []byte
	var err error
	if mf.Transaction != nil {
		pos := uint64(len(b))
		if b, err = appendSection(b, mf.Transaction); err != nil {
			return nil, fmt.Errorf("encode transaction section: %w", err)
		}
		m.TransactionSection = &pos
	}
	if mf.Indices != nil {
		pos := uint64(len(b))
		if b, err = appendSection(b, mf.Indices); err != nil {
			return nil, fmt.Errorf("encode index section: %w", err)
		}
		m.IndexSection = &pos
	}
	pos := uint64(len(b))
	if b, err = appendSection(b, m); err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	b = binary.LittleEndian.AppendUint64(b, pos)
	b = binary.LittleEndian.AppendUint16(b, ManifestMajor)
	b = binary.LittleEndian.AppendUint16(b, ManifestMinor)
	return append(b, magic...), nil
}
