package file

import (
	"encoding/binary"
	"os"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/mvq-dev/mvq/lance/pb/enc21pb"
	"github.com/mvq-dev/mvq/lance/pb/file2pb"
	"github.com/mvq-dev/mvq/lance/pb/filepb"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
)

func TestZZDump(t *testing.T) {
	p := os.Getenv("LANCE_DUMP")
	if p == "" {
		t.Skip()
	}
	b, _ := os.ReadFile(p)
	if os.Getenv("LANCE_MANIFEST") != "" {
		pos := binary.LittleEndian.Uint64(b[len(b)-16:])
		n := binary.LittleEndian.Uint32(b[pos:])
		var m tablepb.Manifest
		if err := proto.Unmarshal(b[pos+4:pos+4+uint64(n)], &m); err != nil {
			t.Fatal(err)
		}
		t.Log(prototext.Format(&m))
		return
	}
	f := b[len(b)-40:]
	cmo := binary.LittleEndian.Uint64(f[8:])
	gbo := binary.LittleEndian.Uint64(f[16:])
	ngb := binary.LittleEndian.Uint32(f[24:])
	ncol := binary.LittleEndian.Uint32(f[28:])
	t.Logf("cmo %d gbo %d ngb %d ncol %d ver %d.%d", cmo, gbo, ngb, ncol, binary.LittleEndian.Uint16(f[32:]), binary.LittleEndian.Uint16(f[34:]))
	for i := uint32(0); i < ngb; i++ {
		pos := binary.LittleEndian.Uint64(b[gbo+16*uint64(i):])
		sz := binary.LittleEndian.Uint64(b[gbo+16*uint64(i)+8:])
		var fd filepb.FileDescriptor
		if err := proto.Unmarshal(b[pos:pos+sz], &fd); err == nil && i == 0 {
			t.Logf("gb%d: %s", i, prototext.Format(&fd))
		}
	}
	for c := uint32(0); c < ncol; c++ {
		pos := binary.LittleEndian.Uint64(b[cmo+16*uint64(c):])
		sz := binary.LittleEndian.Uint64(b[cmo+16*uint64(c)+8:])
		var cm file2pb.ColumnMetadata
		if err := proto.Unmarshal(b[pos:pos+sz], &cm); err != nil {
			t.Fatal(err)
		}
		for pi, pg := range cm.Pages {
			var a anypb.Any
			proto.Unmarshal(pg.Encoding.GetDirect().Encoding, &a)
			var pl enc21pb.PageLayout
			proto.Unmarshal(a.Value, &pl)
			t.Logf("col %d page %d rows %d prio %d sizes %v url %s\n%s", c, pi, pg.Length, pg.Priority, pg.BufferSizes, a.TypeUrl, prototext.Format(&pl))
		}
	}
}
