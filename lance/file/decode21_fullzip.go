package file

import (
	"encoding/binary"

	"github.com/mvq-dev/mvq/lance/pb/enc21pb"
)

// Full-zip layout: buffer 0 zips, per entry, a control word (rep level in
// the high bits, def level in the low bits_def bits; 1, 2 or 4 bytes, absent
// when neither level exists), then for visible entries the value: fixed
// width values always (nulls included), variable width values a length of
// bits_per_offset bits then the bytes, for valid items only. Buffer 1, when
// present, is the repetition index: rows+1 byte offsets into buffer 0, each
// 1, 2, 4 or 8 bytes wide.

type fullZip struct {
	l          *enc21pb.FullZipLayout
	cwBytes    int
	bitsDef    uint
	fixed      bool
	valueBytes int // fixed: bytes per value (validity included)
	lenBytes   int // variable: bytes per length
	mr, mvd    uint16
	hasRep     bool
	hasDef     bool
}

func (r *Reader) decodeFullZipPage(p *PageInfo, l *enc21pb.FullZipLayout, ranges []rowRange) ([]levelSlice, error) {
	layers := l.GetLayers()
	if err := checkLayers(layers); err != nil {
		return nil, err
	}
	if len(p.Buffers) < 1 {
		return nil, corruptf("full-zip page without buffers")
	}
	fz := &fullZip{l: l, mr: maxRep(layers), mvd: maxVisibleDef(layers),
		hasRep: l.GetBitsRep() > 0, hasDef: l.GetBitsDef() > 0, bitsDef: uint(l.GetBitsDef())}
	if l.GetBitsRep() > 16 || l.GetBitsDef() > 16 {
		return nil, corruptf("control words of %d+%d bits", l.GetBitsRep(), l.GetBitsDef())
	}
	switch tb := l.GetBitsRep() + l.GetBitsDef(); {
	case tb == 0:
	case tb <= 8:
		fz.cwBytes = 1
	case tb <= 16:
		fz.cwBytes = 2
	default:
		fz.cwBytes = 4
	}
	if fz.mr > 0 && !fz.hasRep {
		return nil, corruptf("list layers without repetition levels")
	}
	switch d := l.GetDetails().(type) {
	case *enc21pb.FullZipLayout_BitsPerValue:
		fz.fixed = true
		vb, err := perValueFixedBytes(l.GetValueCompression())
		if err != nil {
			return nil, err
		}
		fz.valueBytes = vb
	case *enc21pb.FullZipLayout_BitsPerOffset:
		switch d.BitsPerOffset {
		case 8, 16, 32, 64:
			fz.lenBytes = int(d.BitsPerOffset / 8)
		default:
			return nil, corruptf("full-zip lengths of %d bits", d.BitsPerOffset)
		}
	default:
		return nil, corruptf("full-zip layout without value details")
	}
	data := p.Buffers[0]
	var repIndex BufferRef
	hasIndex := len(p.Buffers) > 1
	var idxWidth uint64
	if hasIndex {
		repIndex = p.Buffers[1]
		if p.NumRows+1 == 0 || repIndex.Size%(p.NumRows+1) != 0 {
			return nil, corruptf("full-zip repetition index of %d bytes for %d rows", repIndex.Size, p.NumRows)
		}
		idxWidth = repIndex.Size / (p.NumRows + 1)
		switch idxWidth {
		case 1, 2, 4, 8:
		default:
			return nil, corruptf("full-zip repetition index of %d-byte entries", idxWidth)
		}
	}
	var out []levelSlice
	for _, rg := range ranges {
		var buf []byte
		var err error
		switch {
		case hasIndex:
			ib, err := r.c.ReadRange(repIndex, rg.start*idxWidth, (rg.end-rg.start+1)*idxWidth)
			if err != nil {
				return nil, err
			}
			s, e := readUint(ib, idxWidth), readUint(ib[len(ib)-int(idxWidth):], idxWidth)
			if s > e {
				return nil, corruptf("full-zip repetition index decreases")
			}
			buf, err = r.c.ReadRange(data, s, e-s)
		case fz.fixed && !fz.hasRep:
			per := uint64(fz.cwBytes + fz.valueBytes)
			if rg.end > data.Size/per {
				return nil, corruptf("full-zip rows [%d, %d) past the %d-byte buffer", rg.start, rg.end, data.Size)
			}
			buf, err = r.c.ReadRange(data, rg.start*per, (rg.end-rg.start)*per)
		default:
			return nil, corruptf("variable-width full-zip page without a repetition index")
		}
		if err != nil {
			return nil, err
		}
		ls, err := fz.unzip(buf, int(rg.end-rg.start))
		if err != nil {
			return nil, err
		}
		ls.layers = layers
		out = append(out, ls)
	}
	return out, nil
}

func readUint(b []byte, w uint64) uint64 {
	switch w {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return binary.LittleEndian.Uint64(b)
}

// perValueFixedBytes is the size of one fixed-width full-zip value.
func perValueFixedBytes(enc *enc21pb.CompressiveEncoding) (int, error) {
	switch c := enc.GetCompression().(type) {
	case *enc21pb.CompressiveEncoding_Flat:
		b := c.Flat.GetBitsPerValue()
		if b == 0 || b%8 != 0 || b > 1<<24 {
			return 0, unsupportedf("full-zip values of %d bits", b)
		}
		return int(b / 8), nil
	case *enc21pb.CompressiveEncoding_FixedSizeList:
		layers, flat, cum, err := fslLayers(c.FixedSizeList)
		if err != nil {
			return 0, err
		}
		if flat.GetBitsPerValue()%8 != 0 || flat.GetBitsPerValue() == 0 || flat.GetBitsPerValue() > 1<<12 {
			return 0, unsupportedf("full-zip fixed-size list of %d-bit items", flat.GetBitsPerValue())
		}
		// Each value: per layer with validity, outermost first, a bitmap
		// over the value's items in that layer (whole bytes); then the items.
		n := cum * int(flat.GetBitsPerValue()/8)
		k := 1
		for _, l := range layers {
			k *= l.dim
			if l.valid {
				n += (k + 7) / 8
			}
		}
		return n, nil
	}
	return 0, unsupportedf("full-zip fixed values encoded as %T", enc.GetCompression())
}

// unzip splits the entries of n whole rows.
func (fz *fullZip) unzip(buf []byte, rows int) (levelSlice, error) {
	var ls levelSlice
	var rep, def []uint16
	pos := 0
	var vals []byte // variable values, or fixed ones gathered from between control words
	var offs []uint64
	if !fz.fixed {
		offs = make([]uint64, 1, rows+1)
	}
	if !fz.fixed || fz.cwBytes > 0 {
		// The values are at most the entries' bytes: one allocation, not
		// the copies of growing by append (a 40k-document read allocated
		// 2.8 times its values).
		vals = make([]byte, 0, len(buf))
	}
	if fz.hasRep {
		rep = make([]uint16, 0, rows)
	}
	if fz.hasDef {
		def = make([]uint16, 0, rows)
	}
	nvis := 0
	mask := uint32(1)<<fz.bitsDef - 1
	for pos < len(buf) {
		var d uint16
		if fz.cwBytes > 0 {
			if len(buf)-pos < fz.cwBytes {
				return ls, corruptf("control word past the end")
			}
			var w uint32
			switch fz.cwBytes {
			case 1:
				w = uint32(buf[pos])
			case 2:
				w = uint32(binary.LittleEndian.Uint16(buf[pos:]))
			case 4:
				w = binary.LittleEndian.Uint32(buf[pos:])
			}
			pos += fz.cwBytes
			if fz.hasRep {
				rep = append(rep, uint16(w>>fz.bitsDef))
			}
			if fz.hasDef {
				d = uint16(w & mask)
				def = append(def, d)
			}
		}
		if fz.hasDef && d > fz.mvd {
			continue // a null or empty list: no value
		}
		nvis++
		if fz.fixed {
			if len(buf)-pos < fz.valueBytes {
				return ls, corruptf("value past the end")
			}
			if fz.cwBytes > 0 {
				vals = append(vals, buf[pos:pos+fz.valueBytes]...)
			}
			pos += fz.valueBytes
			continue
		}
		if d != 0 {
			offs = append(offs, uint64(len(vals)))
			continue
		}
		if len(buf)-pos < fz.lenBytes {
			return ls, corruptf("length past the end")
		}
		n := readUint(buf[pos:], uint64(fz.lenBytes))
		pos += fz.lenBytes
		if n > uint64(len(buf)-pos) {
			return ls, corruptf("value of %d bytes past the end", n)
		}
		vals = append(vals, buf[pos:pos+int(n)]...)
		pos += int(n)
		offs = append(offs, uint64(len(vals)))
	}
	if !fz.hasRep && nvis != rows && (fz.hasDef || !fz.fixed) {
		return ls, corruptf("full-zip rows hold %d values, want %d", nvis, rows)
	}
	ls.rep, ls.def = rep, def
	var vb *vblock
	var err error
	if fz.fixed {
		data := buf // without control words the entries are the values
		if fz.cwBytes > 0 {
			data = vals
		}
		vb, err = fz.fixedValues(data, nvis)
	} else {
		vb, err = perValueVariable(fz.l.GetValueCompression(), &vblock{kind: vVar, n: nvis, data: vals, offs: offs})
	}
	if err != nil {
		return ls, err
	}
	ls.vals, ls.from, ls.to = vb, 0, nvis
	return ls, nil
}

// fixedValues decodes nvis fixed-width values laid end to end in data.
func (fz *fullZip) fixedValues(data []byte, nvis int) (*vblock, error) {
	enc := fz.l.GetValueCompression()
	switch c := enc.GetCompression().(type) {
	case *enc21pb.CompressiveEncoding_Flat:
		return newFixed(data, nvis, fz.valueBytes*8)
	case *enc21pb.CompressiveEncoding_FixedSizeList:
		layers, flat, cum, err := fslLayers(c.FixedSizeList)
		if err != nil {
			return nil, err
		}
		ib := int(flat.GetBitsPerValue() / 8)
		anyValid := false
		for _, l := range layers {
			anyValid = anyValid || l.valid
		}
		if !anyValid {
			items, err := newFixed(data, nvis*cum, ib*8)
			if err != nil {
				return nil, err
			}
			return nestFSL(layers, nil, items, nvis)
		}
		if len(data) < nvis*fz.valueBytes {
			return nil, corruptf("%d full-zip values of %d bytes in %d bytes", nvis, fz.valueBytes, len(data))
		}
		// Unzip each value's bitmaps (one per layer with validity) and items.
		valid := make([][]byte, len(layers))
		per := make([]int, len(layers)) // the layer's items per value
		k := 1
		for i, l := range layers {
			k *= l.dim
			per[i] = k
			if l.valid {
				valid[i] = make([]byte, (nvis*k+7)/8)
			}
		}
		items := make([]byte, 0, nvis*cum*ib)
		for v := 0; v < nvis; v++ {
			val := data[v*fz.valueBytes : (v+1)*fz.valueBytes]
			for i, l := range layers {
				if !l.valid {
					continue
				}
				for j := 0; j < per[i]; j++ {
					if val[j/8]&(1<<(j%8)) != 0 {
						bit := v*per[i] + j
						valid[i][bit/8] |= 1 << (bit % 8)
					}
				}
				val = val[(per[i]+7)/8:]
			}
			items = append(items, val[:cum*ib]...)
		}
		child, err := newFixed(items, nvis*cum, ib*8)
		if err != nil {
			return nil, err
		}
		return nestFSL(layers, valid, child, nvis)
	}
	return nil, unsupportedf("full-zip fixed values encoded as %T", enc.GetCompression())
}

// perValueVariable undoes per-value compression of variable-width values.
func perValueVariable(enc *enc21pb.CompressiveEncoding, in *vblock) (*vblock, error) {
	switch c := enc.GetCompression().(type) {
	case *enc21pb.CompressiveEncoding_Variable:
		return in, nil
	case *enc21pb.CompressiveEncoding_Fsst:
		return fsstBlock(c.Fsst.GetSymbolTable(), in)
	case *enc21pb.CompressiveEncoding_General:
		var data []byte
		offs := make([]uint64, in.n+1)
		for i := 0; i < in.n; i++ {
			v := in.data[in.offs[i]:in.offs[i+1]]
			if len(v) > 0 {
				raw, err := decompressGeneral(c.General.GetCompression(), v)
				if err != nil {
					return nil, err
				}
				if len(data)+len(raw) > maxDecodedBytes {
					return nil, corruptf("values expand past %d bytes", maxDecodedBytes)
				}
				data = append(data, raw...)
			}
			offs[i+1] = uint64(len(data))
		}
		return &vblock{kind: vVar, n: in.n, data: data, offs: offs}, nil
	}
	return nil, unsupportedf("full-zip variable values encoded as %T", enc.GetCompression())
}
