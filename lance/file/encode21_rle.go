package file

import (
	"bytes"

	"github.com/mvq-dev/mvq/lance/pb/enc21pb"
)

// Run-length mini-blocks (Lance's Rle): each chunk has two buffers, the run
// values (the value width each) and the run lengths (one byte each, runs
// over 255 split). Chunks hold at most 2048 values, a power of two except
// the last, and at most miniblockMaxBytes of runs.
const rleMaxChunkValues = 2048

// rleRunCount counts runs of equal w-byte values.
func rleRunCount(data []byte, w, n int) int {
	if n == 0 {
		return 0
	}
	runs := 1
	for i := 1; i < n; i++ {
		if !bytes.Equal(data[i*w:(i+1)*w], data[(i-1)*w:i*w]) {
			runs++
		}
	}
	return runs
}

// rleChunks encodes the fixed-width values run-length, or returns nil when
// runs are not under half the values (Lance's default threshold).
func rleChunks(s *fixedSink) ([]mbChunk, int) {
	if s.dim > 0 || (s.w != 1 && s.w != 2 && s.w != 4 && s.w != 8) || s.n == 0 {
		return nil, -1
	}
	if rleRunCount(s.data, s.w, s.n) >= s.n/2 {
		return nil, -1
	}
	var out []mbChunk
	total := 0
	for pos := 0; pos < s.n; {
		m := min(rleMaxChunkValues, s.n-pos)
		last := pos+m == s.n
		for {
			vals, lens := rleEncode(s.data[pos*s.w:(pos+m)*s.w], s.w)
			if len(vals)+len(lens) <= miniblockMaxBytes || m <= 2 {
				c := mbChunk{n: m, bufs: [][]byte{vals, lens}}
				if !last {
					c.log = uint8(bitsLen(m) - 1)
				}
				out = append(out, c)
				total += len(vals) + len(lens)
				break
			}
			// Too many runs for one chunk: take the largest power of two
			// below m (the chunk is then not the last).
			p := 1
			for p*2 < m {
				p *= 2
			}
			m, last = p, false
		}
		pos += m
	}
	return out, total
}

func bitsLen(m int) int {
	n := 0
	for m > 0 {
		n++
		m >>= 1
	}
	return n
}

func rleEncode(data []byte, w int) (vals, lens []byte) {
	n := len(data) / w
	for i := 0; i < n; {
		j := i + 1
		for j < n && bytes.Equal(data[j*w:(j+1)*w], data[i*w:(i+1)*w]) {
			j++
		}
		for run := j - i; run > 0; run -= 255 {
			vals = append(vals, data[i*w:(i+1)*w]...)
			lens = append(lens, byte(min(run, 255)))
		}
		i = j
	}
	return vals, lens
}

func rleEnc(bitsPerValue int) *enc21pb.CompressiveEncoding {
	return &enc21pb.CompressiveEncoding{Compression: &enc21pb.CompressiveEncoding_Rle{Rle: &enc21pb.Rle{
		Values: flatEnc(uint64(bitsPerValue)), RunLengths: flatEnc(8)}}}
}
