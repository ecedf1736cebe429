package file

import (
	"encoding/binary"

	"github.com/mvq-dev/mvq/lance/pb/enc21pb"
)

// decodeBlobPage reads a blob page: its inner layout holds one description
// per value, a packed struct of u64 position (absolute in the file) and u64
// size. A size of 0 is an empty value when the position is 0 and otherwise
// a null whose levels are smuggled in the position: the definition level
// shifted left 16 bits plus the repetition level. The values are read from
// the file and returned as variable-width items, so a blob column reads as
// the large_binary its schema declares (LanceDB's toArrow() returns the
// descriptions instead; the bytes they point at are what this returns).
func (r *Reader) decodeBlobPage(p *PageInfo, l *enc21pb.BlobLayout, ranges []rowRange) ([]levelSlice, error) {
	layers := l.GetLayers()
	if err := checkLayers(layers); err != nil {
		return nil, err
	}
	if maxRep(layers) > 0 {
		return nil, unsupportedf("blob values inside lists")
	}
	md := maxDef(layers)
	inner := l.GetInnerLayout()
	if inner == nil {
		return nil, corruptf("blob layout without an inner layout")
	}
	if _, ok := inner.GetLayout().(*enc21pb.PageLayout_BlobLayout); ok {
		return nil, corruptf("blob layout inside a blob layout")
	}
	descs, err := r.decodePage(p, inner, ranges)
	if err != nil {
		return nil, err
	}
	out := make([]levelSlice, 0, len(descs))
	var total uint64
	for _, d := range descs {
		if d.rep != nil || d.def != nil {
			return nil, corruptf("blob descriptions with their own levels")
		}
		items, err := materialize(d.items())
		if err != nil {
			return nil, err
		}
		n := 0
		for _, it := range items {
			if it.b.kind != vFixed || it.b.width != 128 {
				return nil, corruptf("blob descriptions stored as %v of %d bits", it.b.kind, it.b.width)
			}
			n += it.to - it.from
		}
		offs := make([]uint64, 1, n+1)
		var def []uint16
		var data []byte
		k := 0
		for _, it := range items {
			for i := it.from; i < it.to; i++ {
				pos := binary.LittleEndian.Uint64(it.b.data[16*i:])
				size := binary.LittleEndian.Uint64(it.b.data[16*i+8:])
				switch {
				case size == 0 && pos != 0:
					if d := pos >> 16; d == 0 || d > uint64(md) || pos&0xffff != 0 {
						return nil, corruptf("blob null with levels %#x (maximum definition level %d, no lists)", pos, md)
					}
					if def == nil {
						def = make([]uint16, n)
					}
					def[k] = uint16(pos >> 16)
				case size > 0:
					if total += size; total > maxDecodedBytes {
						return nil, corruptf("blob values of more than %d bytes in one read", maxDecodedBytes)
					}
					b, err := r.c.ReadBuffer(BufferRef{Offset: pos, Size: size})
					if err != nil {
						return nil, err
					}
					data = append(data, b...)
				}
				offs = append(offs, uint64(len(data)))
				k++
			}
		}
		out = append(out, levelSlice{def: def, layers: layers, vals: &vblock{kind: vVar, n: n, data: data, offs: offs}, from: 0, to: n})
	}
	return out, nil
}
