package chunker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mvq-dev/mvq/internal/strictjson"
)

// MaxChunkSize is the largest accepted chunk_size.
const MaxChunkSize = 1 << 20

// maxSeparators bounds the separators list (and so the recursion depth).
const maxSeparators = 32

// Spec is the JSON chunker spec users send.
type Spec struct {
	Chunker      string `json:"chunker"`       // "fixed" | "recursive" | "sentence"
	InputColumn  string `json:"input_column"`  // required
	OutputColumn string `json:"output_column"` // required, != input_column, must not start with "__"
	ChunkSize    int    `json:"chunk_size"`    // > 0, <= MaxChunkSize
	ChunkOverlap int    `json:"chunk_overlap"` // 0 <= overlap < size
	Unit         string `json:"unit"`          // "chars" (default when empty) | "words"
	KeepInput    bool   `json:"keep_input"`    // keep the input column in the view output
	// Separators applies to "recursive" only; nil or empty means the default
	// paragraph, line, sentence, word order ("\n\n", "\n", ". ", " ").
	Separators []string `json:"separators,omitempty"`
}

// FieldError names the offending JSON field of a spec. Field is "udtf" when
// the document as a whole is unusable (not JSON, not an object).
type FieldError struct{ Field, Message string }

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// docField is the Field of errors about the document rather than one field.
const docField = "udtf"

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Parse decodes a JSON spec strictly, fills defaults and validates it. Field
// names match exactly (case-sensitive); unknown fields, duplicate keys, type
// mismatches and trailing data are rejected. Every error is a *FieldError.
func Parse(data []byte) (Spec, error) {
	var s Spec
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return s, fieldErr(docField, "empty chunker spec")
	}
	if trimmed[0] != '{' {
		return s, fieldErr(docField, "chunker spec must be a JSON object")
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&raw); err != nil {
		return s, fieldErr(docField, "invalid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return s, fieldErr(docField, "invalid JSON: unexpected data after the object")
	}
	// A duplicate key would silently take its last value.
	if err := strictjson.Check(trimmed, 8); err != nil {
		return s, fieldErr(docField, "invalid JSON: %v", err)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys) // report the same field first every time
	for _, k := range keys {
		var dst any
		want := "a string"
		switch k {
		case "chunker":
			dst = &s.Chunker
		case "input_column":
			dst = &s.InputColumn
		case "output_column":
			dst = &s.OutputColumn
		case "chunk_size":
			dst, want = &s.ChunkSize, "an integer"
		case "chunk_overlap":
			dst, want = &s.ChunkOverlap, "an integer"
		case "unit":
			dst = &s.Unit
		case "keep_input":
			dst, want = &s.KeepInput, "a boolean"
		case "separators":
			dst, want = &s.Separators, "an array of strings"
		default:
			return Spec{}, fieldErr(k, "unknown field")
		}
		if err := json.Unmarshal(raw[k], dst); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return Spec{}, fieldErr(k, "must be %s (got JSON %s)", want, te.Value)
			}
			return Spec{}, fieldErr(k, "%v", err)
		}
	}
	if s.Unit == "" {
		s.Unit = UnitChars
	}
	if err := s.Validate(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// Chunker and unit names accepted in a Spec.
const (
	KindFixed     = "fixed"
	KindRecursive = "recursive"
	KindSentence  = "sentence"
	UnitChars     = "chars"
	UnitWords     = "words"
)

// Validate reports the first problem with s as a *FieldError. An empty Unit
// is valid and means chars.
func (s Spec) Validate() error {
	switch s.Chunker {
	case KindFixed, KindRecursive, KindSentence:
	case "":
		return fieldErr("chunker", "required (one of fixed, recursive, sentence)")
	default:
		return fieldErr("chunker", "unknown chunker %q (want fixed, recursive or sentence)", s.Chunker)
	}
	if strings.TrimSpace(s.InputColumn) == "" {
		return fieldErr("input_column", "required")
	}
	if strings.TrimSpace(s.OutputColumn) == "" {
		return fieldErr("output_column", "required")
	}
	// Column names are compared case-insensitively, as SQL identifiers are.
	if strings.EqualFold(s.OutputColumn, s.InputColumn) {
		return fieldErr("output_column", "must differ from input_column (both %q)", s.InputColumn)
	}
	if strings.HasPrefix(s.OutputColumn, "__") {
		return fieldErr("output_column", "must not start with \"__\" (reserved) (got %q)", s.OutputColumn)
	}
	if s.ChunkSize <= 0 || s.ChunkSize > MaxChunkSize {
		return fieldErr("chunk_size", "must be > 0 and <= %d (got %d)", MaxChunkSize, s.ChunkSize)
	}
	if s.ChunkOverlap < 0 || s.ChunkOverlap >= s.ChunkSize {
		return fieldErr("chunk_overlap", "must be >= 0 and < chunk_size (got %d, chunk_size %d)", s.ChunkOverlap, s.ChunkSize)
	}
	switch s.Unit {
	case "", UnitChars, UnitWords:
	default:
		return fieldErr("unit", "unknown unit %q (want chars or words)", s.Unit)
	}
	if len(s.Separators) > 0 {
		if s.Chunker != KindRecursive {
			return fieldErr("separators", "only valid with chunker recursive (chunker is %q)", s.Chunker)
		}
		if len(s.Separators) > maxSeparators {
			return fieldErr("separators", "at most %d separators (got %d)", maxSeparators, len(s.Separators))
		}
		for i, sep := range s.Separators {
			if sep == "" {
				return fieldErr("separators", "separator %d is empty (cutting at unit positions is always the last resort)", i)
			}
		}
	}
	return nil
}

// Chunker cuts text into chunks. Implementations are safe for concurrent use.
type Chunker interface {
	// Chunk appends the chunks of text to dst and returns it. Empty text
	// gives no chunks.
	Chunk(text string, dst []string) []string
}

var defaultSeparators = []string{"\n\n", "\n", ". ", " "}

// New validates s and returns its Chunker.
func New(s Spec) (Chunker, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	u := unitChars
	if s.Unit == UnitWords {
		u = unitWords
	}
	size, overlap := s.ChunkSize, s.ChunkOverlap
	switch s.Chunker {
	case KindFixed:
		if u == unitWords {
			return fixedWords{size: size, overlap: overlap}, nil
		}
		return fixedChars{size: size, overlap: overlap}, nil
	case KindRecursive:
		seps := defaultSeparators
		if len(s.Separators) > 0 {
			seps = slices.Clone(s.Separators)
		}
		return &recursive{size: size, overlap: overlap, unit: u, seps: seps}, nil
	default: // KindSentence; Validate rejected anything else
		return sentence{size: size, overlap: overlap, unit: u}, nil
	}
}
