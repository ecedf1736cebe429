package dataset

import (
	"fmt"
	"math/bits"
	"strings"
)

// Feature flags of a manifest (reader_feature_flags, writer_feature_flags).
// A reader must refuse a dataset with a reader flag it does not know; a
// writer one with a writer flag it does not know.
const (
	// FlagDeletionFiles: fragments may have deletion files.
	FlagDeletionFiles uint64 = 1
	// FlagStableRowIDs: row ids survive moves and updates; fragments carry
	// row id sequences.
	FlagStableRowIDs uint64 = 2
	// FlagUseV2FormatDeprecated: data files in the 2.x format (no longer set).
	FlagUseV2FormatDeprecated uint64 = 4
	// FlagTableConfig: the manifest has table config.
	FlagTableConfig uint64 = 8
	// FlagBasePaths: files may live under other base paths.
	FlagBasePaths uint64 = 16
	// FlagDisableTransactionFile: transactions are only inline in the
	// manifest, not in `_transactions/`.
	FlagDisableTransactionFile uint64 = 32
)

var flagNames = map[uint64]string{
	FlagDeletionFiles:          "deletion files",
	FlagStableRowIDs:           "stable row ids",
	FlagUseV2FormatDeprecated:  "v2 format (deprecated)",
	FlagTableConfig:            "table config",
	FlagBasePaths:              "base paths",
	FlagDisableTransactionFile: "no transaction file",
}

// ReaderFlags are the reader flags this package reads datasets with. Stable
// row ids need nothing for reading rows (row id sequences are only for
// looking rows up by stable id).
const ReaderFlags = FlagDeletionFiles | FlagStableRowIDs | FlagUseV2FormatDeprecated |
	FlagTableConfig | FlagBasePaths | FlagDisableTransactionFile

// WriterFlags are the writer flags this package commits on top of. Stable
// row ids are not among them: new fragments would need row id sequences,
// which this package does not write.
const WriterFlags = FlagDeletionFiles | FlagUseV2FormatDeprecated | FlagTableConfig |
	FlagBasePaths | FlagDisableTransactionFile

// UnsupportedFeatureError is a dataset that needs features this package
// does not have.
type UnsupportedFeatureError struct {
	Writer  bool   // writer flags (committing); false: reader flags (reading)
	Flags   uint64 // the manifest's flags
	Unknown uint64 // the flags this package lacks
}

func (e *UnsupportedFeatureError) Error() string {
	var names []string
	for f := e.Unknown; f != 0; f &= f - 1 {
		bit := f & -f
		if n, ok := flagNames[bit]; ok {
			names = append(names, fmt.Sprintf("%q (flag %d)", n, bit))
		} else {
			names = append(names, fmt.Sprintf("unknown flag %d (bit %d)", bit, bits.TrailingZeros64(bit)))
		}
	}
	what, verb := "reader", "read"
	if e.Writer {
		what, verb = "writer", "write to"
	}
	return fmt.Sprintf("cannot %s this Lance dataset: it needs %s features this version does not support: %s (%s flags %d)",
		verb, what, strings.Join(names, ", "), what, e.Flags)
}

// CheckReaderFlags returns an *UnsupportedFeatureError naming each reader
// flag this package does not know, or nil.
func CheckReaderFlags(flags uint64) error {
	if u := flags &^ ReaderFlags; u != 0 {
		return &UnsupportedFeatureError{Flags: flags, Unknown: u}
	}
	return nil
}

// CheckWriterFlags is CheckReaderFlags for committing a new version.
func CheckWriterFlags(flags uint64) error {
	if u := flags &^ WriterFlags; u != 0 {
		return &UnsupportedFeatureError{Writer: true, Flags: flags, Unknown: u}
	}
	return nil
}
