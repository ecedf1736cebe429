package arrowjson

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

func ipcTestSchema() *arrow.Schema {
	md := arrow.NewMetadata([]string{"owner"}, []string{"mvq"})
	fmd := arrow.NewMetadata([]string{"ARROW:extension:name"}, []string{"lance.json"})
	return arrow.NewSchema([]arrow.Field{
		reqf("id", arrow.PrimitiveTypes.Int64),
		nf("name", arrow.BinaryTypes.String),
		{Name: "doc", Type: arrow.BinaryTypes.LargeBinary, Nullable: true, Metadata: fmd},
		nf("vec", arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32)),
		nf("ts", arrow.FixedWidthTypes.Timestamp_us),
		nf("meta", arrow.StructOf(nf("tags", arrow.ListOf(arrow.BinaryTypes.String)))),
	}, &md)
}

func TestIPCSchemaRoundTrip(t *testing.T) {
	s := ipcTestSchema()
	b64, err := EncodeIPCSchema(s)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("not standard base64: %v", err)
	}
	variants := map[string]string{
		"std":          b64,
		"url":          base64.URLEncoding.EncodeToString(raw),
		"raw std":      base64.RawStdEncoding.EncodeToString(raw),
		"raw url":      base64.RawURLEncoding.EncodeToString(raw),
		"whitespace":   "\n  " + b64 + "  \n",
		"line wrapped": b64[:40] + "\n" + b64[40:],
	}
	for name, in := range variants {
		got, err := DecodeIPCSchema(in)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !got.Equal(s) || !got.Metadata().Equal(s.Metadata()) {
			t.Errorf("%s: got %s want %s", name, got, s)
		}
	}
}

func TestDecodeIPCSchemaWithBatch(t *testing.T) {
	mem := checkedMem(t)
	s := sch(nf("a", arrow.PrimitiveTypes.Int64))
	rec, err := DecodeRows(strings.NewReader(`[{"a":1},{"a":2}]`), s, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s), ipc.WithAllocator(mem))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeIPCSchema(base64.StdEncoding.EncodeToString(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(s) {
		t.Errorf("got %s", got)
	}
}

func TestDecodeIPCSchemaErrors(t *testing.T) {
	good, err := EncodeIPCSchema(ipcTestSchema())
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(good)
	enc := base64.StdEncoding.EncodeToString
	huge := make([]byte, 16)
	binary.LittleEndian.PutUint32(huge, 0xFFFFFFFF)
	binary.LittleEndian.PutUint32(huge[4:], 0x7FFFFFFF)
	eos := []byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0}
	garbage := make([]byte, 64)
	binary.LittleEndian.PutUint32(garbage, 0xFFFFFFFF)
	binary.LittleEndian.PutUint32(garbage[4:], 56)
	for i := 8; i < len(garbage); i++ {
		garbage[i] = byte(i * 7)
	}
	var file bytes.Buffer
	fw, err := ipc.NewFileWriter(&file, ipc.WithSchema(ipcTestSchema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", "empty string"},
		{"blank", "  \n ", "empty string"},
		{"bad base64", "not base64!", "invalid base64"},
		{"too short", enc([]byte{1, 2}), "too short"},
		{"end of stream only", enc(eos), "ends before the schema message"},
		{"negative length", enc([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0x80}), "invalid message length"},
		{"huge length", enc(huge), "truncated stream"},
		{"truncated", enc(raw[:len(raw)/2]), "truncated stream"},
		{"garbage message", enc(garbage), "not a valid Arrow IPC stream"},
		{"text", enc([]byte("hello, this is not arrow at all")), "IPC schema"},
		{"file format", enc(file.Bytes()), "file format"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := DecodeIPCSchema(tc.in)
			if err == nil {
				t.Fatalf("no error, got schema %s", s)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestEncodeIPCSchemaNil(t *testing.T) {
	if _, err := EncodeIPCSchema(nil); err == nil {
		t.Error("no error")
	}
}

// TestIPCSchemaToJSON chains the two schema forms the API uses.
func TestIPCSchemaToJSON(t *testing.T) {
	b64, err := EncodeIPCSchema(ipcTestSchema())
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeIPCSchema(b64)
	if err != nil {
		t.Fatal(err)
	}
	js, err := FromArrow(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := js.ToArrow()
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(s) {
		t.Errorf("got %s want %s", back, s)
	}
}
