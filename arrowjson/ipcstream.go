package arrowjson

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ErrStreamTooLarge is wrapped by ReadIPCStreamBytes when a stream holds
// more than its limit.
var ErrStreamTooLarge = errors.New("stream larger than the limit")

// ReadIPCStreamBytes reads one Arrow IPC stream from r, message by
// message up to and including its end-of-stream marker, and returns its
// bytes for ReadIPC; r is left just after the marker, so another stream
// may follow (a long-lived subprocess answering stream after stream).
// Every message's metadata is verified as a FlatBuffer before its body
// length is taken from it, and no length read from r is allocated before
// it is checked against what is left of limit: more than limit bytes in
// all is an error wrapping ErrStreamTooLarge. Errors reading r are
// returned as they are (io.EOF, io.ErrUnexpectedEOF, a closed pipe);
// malformed framing is an *IPCError.
func ReadIPCStreamBytes(r io.Reader, limit int64) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, asIPCError(p)
		}
	}()
	var word [4]byte
	tooLarge := func(what string, n int64) error {
		return fmt.Errorf("%w: a %s of %d bytes after %d bytes read would pass the limit of %d bytes", ErrStreamTooLarge, what, n, len(out), limit)
	}
	for {
		start := len(out)
		if _, err := io.ReadFull(r, word[:]); err != nil {
			if len(out) > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		out = append(out, word[:]...)
		n := binary.LittleEndian.Uint32(word[:])
		if n == 0xFFFFFFFF {
			if _, err := io.ReadFull(r, word[:]); err != nil {
				return nil, noEOF(err)
			}
			out = append(out, word[:]...)
			n = binary.LittleEndian.Uint32(word[:])
		}
		if n == 0 {
			return out, nil // end of stream
		}
		metaLen := int64(int32(n))
		if metaLen < 8 {
			return nil, ipcErrorf("message at offset %d: metadata length %d", start, metaLen)
		}
		if int64(len(out))+metaLen > limit {
			return nil, tooLarge("message metadata", metaLen)
		}
		metaStart := len(out)
		next, err := appendN(out, r, metaLen)
		if err != nil {
			return nil, err
		}
		out = next
		meta := out[metaStart:]
		if err := verifyMessage(meta); err != nil {
			return nil, ipcErrorf("message at offset %d: invalid metadata: %v", start, err)
		}
		probe := ipc.NewMessage(memory.NewBufferBytes(meta), memory.NewBufferBytes(nil))
		bodyLen := probe.BodyLen()
		probe.Release()
		if bodyLen < 0 {
			return nil, ipcErrorf("message at offset %d: body length %d", start, bodyLen)
		}
		if int64(len(out))+bodyLen > limit {
			return nil, tooLarge("message body", bodyLen)
		}
		if next, err = appendN(out, r, bodyLen); err != nil {
			return nil, err
		}
		out = next
	}
}

// appendN appends exactly k bytes of r to out. k is the other side's
// word: the bytes are copied as they arrive instead of allocated up front,
// so a length that is never sent holds no memory.
func appendN(out []byte, r io.Reader, k int64) ([]byte, error) {
	b := bytes.NewBuffer(out)
	got, err := io.CopyN(b, r, k)
	if got != k {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, noEOF(err)
	}
	return b.Bytes(), nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
