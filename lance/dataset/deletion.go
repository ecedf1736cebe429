package dataset

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/lance/pb/tablepb"
)

// Deletion files record the row offsets (positions within a fragment's
// physical rows) that a fragment has deleted. Two kinds exist:
//   - `.arrow`: an Arrow IPC file with one batch of one non-null uint32
//     column "row_id", buffers compressed (LanceDB writes zstd);
//   - `.bin`: a roaring bitmap in the portable serialization.
//
// LanceDB writes the Arrow kind below 5,000 deleted rows and the bitmap kind
// from there on; WriteDeletionFile does the same.

// BitmapThreshold is the number of deleted rows from which WriteDeletionFile
// writes a roaring bitmap instead of an Arrow file.
const BitmapThreshold = 5000

// MaxDeletionFileSize caps the deletion files this package reads.
const MaxDeletionFileSize = 512 << 20

var deletionSchema = arrow.NewSchema([]arrow.Field{{Name: "row_id", Type: arrow.PrimitiveTypes.Uint32}}, nil)

// DeletionFileName is the file name of a fragment's deletion file
// (`{fragment}-{read_version}-{id}.{arrow|bin}`) inside `_deletions/`.
func DeletionFileName(fragmentID uint64, df *tablepb.DeletionFile) string {
	ext := "arrow"
	if df.GetFileType() == tablepb.DeletionFile_BITMAP {
		ext = "bin"
	}
	return fmt.Sprintf("%d-%d-%d.%s", fragmentID, df.GetReadVersion(), df.GetId(), ext)
}

// DecodeDeletionArrow parses an `.arrow` deletion file into the set of
// deleted row offsets. Corrupt or hostile bytes give an error wrapping
// ErrCorrupt, never a panic; decoding allocates at most a bounded multiple
// of len(b) (see decodeDeletionIPC).
func DecodeDeletionArrow(b []byte) (*roaring.Bitmap, error) {
	if len(b) > MaxDeletionFileSize {
		return nil, corrupt("deletion file of %d bytes is over the %d byte limit", len(b), MaxDeletionFileSize)
	}
	rows, err := decodeDeletionIPC(b)
	if err != nil {
		return nil, fmt.Errorf("deletion file: %w", err)
	}
	bm := roaring.New()
	bm.AddMany(rows)
	return bm, nil
}

// EncodeDeletionArrow writes the row offsets as an `.arrow` deletion file
// (zstd-compressed buffers, like LanceDB).
func EncodeDeletionArrow(rows *roaring.Bitmap) ([]byte, error) {
	b := array.NewUint32Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(rows.ToArray(), nil)
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(deletionSchema, []arrow.Array{col}, int64(col.Len()))
	defer rec.Release()
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(deletionSchema), ipc.WithZstd())
	if err != nil {
		return nil, err
	}
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// The portable roaring serialization (https://github.com/RoaringBitmap/RoaringFormatSpec).
const (
	serialCookieNoRun = 12346
	serialCookie      = 12347
	noOffsetThreshold = 4
	bitmapContainerSz = 8192
	maxContainers     = 1 << 16
)

// DecodeDeletionBitmap parses a `.bin` deletion file (a roaring bitmap in
// the portable serialization). It checks every count and offset against the
// input, so corrupt bytes give an error wrapping ErrCorrupt, never a panic,
// and the bitmap holds at most 8 values per input byte.
func DecodeDeletionBitmap(b []byte) (*roaring.Bitmap, error) {
	if len(b) > MaxDeletionFileSize {
		return nil, corrupt("deletion bitmap of %d bytes is over the %d byte limit", len(b), MaxDeletionFileSize)
	}
	if len(b) < 4 {
		return nil, corrupt("deletion bitmap of %d bytes is too small", len(b))
	}
	var n int       // containers
	var runs []byte // run-container flags, one bit per container
	pos := 0
	cookie := binary.LittleEndian.Uint32(b)
	switch {
	case cookie == serialCookieNoRun:
		if len(b) < 8 {
			return nil, corrupt("deletion bitmap header truncated")
		}
		c := binary.LittleEndian.Uint32(b[4:])
		if c > maxContainers {
			return nil, corrupt("deletion bitmap claims %d containers", c)
		}
		n, pos = int(c), 8
	case cookie&0xFFFF == serialCookie:
		n, pos = int(cookie>>16)+1, 4
		nb := (n + 7) / 8
		if len(b)-pos < nb {
			return nil, corrupt("deletion bitmap run flags truncated")
		}
		runs, pos = b[pos:pos+nb], pos+nb
	default:
		return nil, corrupt("deletion bitmap has cookie %d, not a portable roaring bitmap", cookie)
	}
	if len(b)-pos < 4*n {
		return nil, corrupt("deletion bitmap header of %d containers truncated", n)
	}
	header := b[pos : pos+4*n]
	pos += 4 * n
	isRun := func(i int) bool { return runs != nil && runs[i/8]&(1<<(i%8)) != 0 }
	// The offset table is present without run containers, or with at least
	// noOffsetThreshold containers; containers follow in order either way, so
	// it is skipped after a length check.
	if runs == nil || n >= noOffsetThreshold {
		if len(b)-pos < 4*n {
			return nil, corrupt("deletion bitmap offsets truncated")
		}
		pos += 4 * n
	}
	bm := roaring.New()
	lastKey := -1
	vals := make([]uint32, 0, 4096)
	for i := 0; i < n; i++ {
		key := int(binary.LittleEndian.Uint16(header[4*i:]))
		card := int(binary.LittleEndian.Uint16(header[4*i+2:])) + 1
		if key <= lastKey {
			return nil, corrupt("deletion bitmap container keys not increasing at %d", i)
		}
		lastKey = key
		high := uint32(key) << 16
		switch {
		case isRun(i):
			if len(b)-pos < 2 {
				return nil, corrupt("deletion bitmap run container %d truncated", i)
			}
			nr := int(binary.LittleEndian.Uint16(b[pos:]))
			pos += 2
			if len(b)-pos < 4*nr {
				return nil, corrupt("deletion bitmap run container %d truncated", i)
			}
			for r := 0; r < nr; r++ {
				start := uint64(binary.LittleEndian.Uint16(b[pos+4*r:]))
				length := uint64(binary.LittleEndian.Uint16(b[pos+4*r+2:]))
				if start+length > 0xFFFF {
					return nil, corrupt("deletion bitmap run past its container")
				}
				bm.AddRange(uint64(high)+start, uint64(high)+start+length+1)
			}
			pos += 4 * nr
		case card > 4096:
			if len(b)-pos < bitmapContainerSz {
				return nil, corrupt("deletion bitmap container %d truncated", i)
			}
			vals = vals[:0]
			for w := 0; w < bitmapContainerSz/8; w++ {
				word := binary.LittleEndian.Uint64(b[pos+8*w:])
				for word != 0 {
					bit := uint32(w*64) + uint32(bits.TrailingZeros64(word))
					vals = append(vals, high|bit)
					word &= word - 1
				}
			}
			if len(vals) != card {
				return nil, corrupt("deletion bitmap container %d holds %d values, header says %d", i, len(vals), card)
			}
			bm.AddMany(vals)
			pos += bitmapContainerSz
		default:
			if len(b)-pos < 2*card {
				return nil, corrupt("deletion bitmap container %d truncated", i)
			}
			vals = vals[:0]
			prev := -1
			for k := 0; k < card; k++ {
				v := int(binary.LittleEndian.Uint16(b[pos+2*k:]))
				if v <= prev {
					return nil, corrupt("deletion bitmap container %d not sorted", i)
				}
				prev = v
				vals = append(vals, high|uint32(v))
			}
			bm.AddMany(vals)
			pos += 2 * card
		}
	}
	if pos != len(b) {
		return nil, corrupt("deletion bitmap has %d trailing bytes", len(b)-pos)
	}
	return bm, nil
}

// EncodeDeletionBitmap writes the row offsets as a `.bin` deletion file: the
// portable roaring serialization without run containers (array and bitmap
// containers only, which every roaring reader takes).
func EncodeDeletionBitmap(rows *roaring.Bitmap) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := rows.Clone().WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadDeletionFile reads and decodes a deletion file of either kind.
func ReadDeletionFile(path string, kind tablepb.DeletionFile_DeletionFileType) (*roaring.Bitmap, error) {
	b, err := readCapped(path, MaxDeletionFileSize)
	if err != nil {
		return nil, err
	}
	var bm *roaring.Bitmap
	switch kind {
	case tablepb.DeletionFile_ARROW_ARRAY:
		bm, err = DecodeDeletionArrow(b)
	case tablepb.DeletionFile_BITMAP:
		bm, err = DecodeDeletionBitmap(b)
	default:
		return nil, corrupt("%s: unknown deletion file type %d", path, kind)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return bm, nil
}

// EncodeDeletionFile encodes the deletion file of a fragment, for a commit
// that reads version readVersion, with a fresh random id: its manifest
// entry and its bytes, to be stored as `_deletions/` +
// DeletionFileName(fragment, entry). The kind follows BitmapThreshold.
// rows must not be empty (a fragment without deletions has no deletion
// file).
func EncodeDeletionFile(readVersion uint64, rows *roaring.Bitmap) (*tablepb.DeletionFile, []byte, error) {
	if rows.IsEmpty() {
		return nil, nil, fmt.Errorf("encode deletion file: no deleted rows")
	}
	var idb [8]byte
	if _, err := io.ReadFull(rand.Reader, idb[:]); err != nil {
		return nil, nil, err
	}
	df := &tablepb.DeletionFile{
		ReadVersion:    readVersion,
		Id:             binary.LittleEndian.Uint64(idb[:]),
		NumDeletedRows: rows.GetCardinality(),
	}
	var b []byte
	var err error
	if rows.GetCardinality() >= BitmapThreshold {
		df.FileType = tablepb.DeletionFile_BITMAP
		b, err = EncodeDeletionBitmap(rows)
	} else {
		b, err = EncodeDeletionArrow(rows)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("encode deletion file: %w", err)
	}
	return df, b, nil
}

// WriteDeletionFile writes the deletion file of fragment fragmentID in the
// dataset folder dir (EncodeDeletionFile) and returns its manifest entry.
func WriteDeletionFile(dir string, fragmentID, readVersion uint64, rows *roaring.Bitmap) (*tablepb.DeletionFile, error) {
	if rows.IsEmpty() {
		return nil, fmt.Errorf("write deletion file: no deleted rows for fragment %d", fragmentID)
	}
	df, b, err := EncodeDeletionFile(readVersion, rows)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, DeletionsDir), 0o755); err != nil {
		return nil, err
	}
	if err := createFile(filepath.Join(dir, DeletionsDir, DeletionFileName(fragmentID, df)), b); err != nil {
		return nil, err
	}
	return df, nil
}

// readCapped reads a whole file of at most limit bytes.
func readCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() > limit {
		return nil, corrupt("%s is %d bytes, over the %d byte limit", path, info.Size(), limit)
	}
	b := make([]byte, info.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}
