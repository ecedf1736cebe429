package arrowjson

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// DecodeIPCSchema decodes a base64 Arrow IPC stream and returns its schema.
// The standard and URL-safe alphabets are accepted, padded or not, and
// surrounding whitespace is ignored. The stream must start with the schema
// message; any record batches after it are not read. Errors say whether the
// base64, the framing or the schema message was at fault.
func DecodeIPCSchema(b64 string) (*arrow.Schema, error) {
	s := strings.TrimSpace(b64)
	if s == "" {
		return nil, errors.New("arrowjson: IPC schema: empty string")
	}
	data, err := decodeBase64(s)
	if err != nil {
		return nil, fmt.Errorf("arrowjson: IPC schema: invalid base64: %w", err)
	}
	if bytes.HasPrefix(data, []byte("ARROW1")) {
		return nil, errors.New("arrowjson: IPC schema: got the Arrow IPC file format; send the IPC stream format")
	}
	// Check the framing of the first message before handing it to the IPC
	// reader, which would allocate whatever length the prefix claims.
	hdr := 4
	if len(data) >= 4 && binary.LittleEndian.Uint32(data) == 0xFFFFFFFF {
		hdr = 8
	}
	if len(data) < hdr {
		return nil, fmt.Errorf("arrowjson: IPC schema: stream too short (%d bytes)", len(data))
	}
	msgLen := int32(binary.LittleEndian.Uint32(data[hdr-4 : hdr]))
	switch {
	case msgLen == 0:
		return nil, errors.New("arrowjson: IPC schema: stream ends before the schema message")
	case msgLen < 0:
		return nil, fmt.Errorf("arrowjson: IPC schema: invalid message length %d", msgLen)
	case int(msgLen) > len(data)-hdr:
		return nil, fmt.Errorf("arrowjson: IPC schema: truncated stream: schema message needs %d bytes, %d left", msgLen, len(data)-hdr)
	}
	// The schema message is FlatBuffer-verified before it is decoded (see
	// ReadIPC); batches after it are not read.
	rdr, err := readIPCStream(data, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("arrowjson: IPC schema: not a valid Arrow IPC stream: %w", err)
	}
	defer rdr.Release()
	return rdr.Schema(), nil
}

func decodeBase64(s string) ([]byte, error) {
	enc := base64.StdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if !strings.HasSuffix(s, "=") && len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	return enc.DecodeString(s)
}

// EncodeIPCSchema writes s as an Arrow IPC stream with no record batches
// (schema message and end-of-stream marker) in standard padded base64.
func EncodeIPCSchema(s *arrow.Schema) (string, error) {
	if s == nil {
		return "", errors.New("arrowjson: nil schema")
	}
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s))
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("arrowjson: IPC schema: %w", err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}
