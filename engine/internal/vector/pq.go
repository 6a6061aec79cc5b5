package vector

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
)

// quantizer is a product quantizer: the vector is cut into m sub-vectors,
// and each is replaced by the nearest of 256 centroids trained for its
// subspace, so a code is m bytes. Distances to a query come from a table of
// the query's distance to every centroid (asymmetric distance computation).
type quantizer struct {
	dim     int
	m       int
	starts  []int       // subspace s covers [starts[s], starts[s+1])
	cents   [][]float32 // subspace s: 256 centroids of its width, flat
	dotMode bool        // the table holds -q·c (dot product), else ||q-c||²
}

const pqCentroids = 256

func newQuantizerShape(dim, m int, dotMode bool) *quantizer {
	q := &quantizer{dim: dim, m: m, dotMode: dotMode, starts: make([]int, m+1)}
	base, extra := dim/m, dim%m
	for s := range m {
		w := base
		if s < extra {
			w++
		}
		q.starts[s+1] = q.starts[s] + w
	}
	q.cents = make([][]float32, m)
	return q
}

// trainQuantizer fits the centroids of each subspace to the sample with
// k-means (k-means++ seeding on a subsample, then Lloyd iterations).
func trainQuantizer(sample [][]float32, dim, m int, dotMode bool, seed uint64) *quantizer {
	q := newQuantizerShape(dim, m, dotMode)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	for s := range m {
		lo, hi := q.starts[s], q.starts[s+1]
		w := hi - lo
		pts := make([][]float32, len(sample))
		for i, v := range sample {
			pts[i] = v[lo:hi]
		}
		q.cents[s] = kmeans(pts, w, pqCentroids, 10, rng)
	}
	return q
}

// kmeans clusters pts (of width w) into k centroids, flat.
func kmeans(pts [][]float32, w, k, iters int, rng *rand.Rand) []float32 {
	cents := make([]float32, k*w)
	if len(pts) == 0 {
		return cents
	}
	// k-means++ seeding.
	dmin := make([]float32, len(pts))
	first := pts[rng.IntN(len(pts))]
	copy(cents[:w], first)
	for i, p := range pts {
		dmin[i] = l2sqGo(p, first)
	}
	for c := 1; c < k; c++ {
		var total float64
		for _, d := range dmin {
			total += float64(d)
		}
		var pick int
		if total == 0 {
			pick = rng.IntN(len(pts))
		} else {
			r := rng.Float64() * total
			for i, d := range dmin {
				r -= float64(d)
				if r <= 0 {
					pick = i
					break
				}
			}
		}
		cv := cents[c*w : (c+1)*w]
		copy(cv, pts[pick])
		for i, p := range pts {
			if d := l2sqGo(p, cv); d < dmin[i] {
				dmin[i] = d
			}
		}
	}
	assign := make([]int, len(pts))
	sums := make([]float64, k*w)
	counts := make([]int, k)
	for range iters {
		for i, p := range pts {
			assign[i] = nearest(cents, w, p)
		}
		clear(sums)
		clear(counts)
		for i, p := range pts {
			c := assign[i]
			counts[c]++
			for j, x := range p {
				sums[c*w+j] += float64(x)
			}
		}
		for c := range k {
			if counts[c] == 0 {
				copy(cents[c*w:(c+1)*w], pts[rng.IntN(len(pts))]) // re-seed an empty cluster
				continue
			}
			for j := range w {
				cents[c*w+j] = float32(sums[c*w+j] / float64(counts[c]))
			}
		}
	}
	return cents
}

// nearest returns the index of the centroid nearest p.
func nearest(cents []float32, w int, p []float32) int {
	best, bd := 0, float32(math.MaxFloat32)
	for c := 0; c*w < len(cents); c++ {
		if d := l2sqGo(p, cents[c*w:(c+1)*w]); d < bd {
			best, bd = c, d
		}
	}
	return best
}

// encode returns v's code (appended to dst).
func (q *quantizer) encode(v []float32, dst []byte) []byte {
	for s := range q.m {
		lo, hi := q.starts[s], q.starts[s+1]
		dst = append(dst, byte(nearest(q.cents[s], hi-lo, v[lo:hi])))
	}
	return dst
}

// table fills t (m × 256) with the query's partial distances.
func (q *quantizer) table(query []float32, t []float32) {
	for s := range q.m {
		lo, hi := q.starts[s], q.starts[s+1]
		w := hi - lo
		qs := query[lo:hi]
		cs := q.cents[s]
		row := t[s*pqCentroids : (s+1)*pqCentroids]
		for c := range pqCentroids {
			if q.dotMode {
				row[c] = -dotGo(qs, cs[c*w:(c+1)*w])
			} else {
				row[c] = l2sqGo(qs, cs[c*w:(c+1)*w])
			}
		}
	}
}

// adc sums a code's partial distances from the table.
func adc(t []float32, code []byte) float32 {
	var s0, s1 float32
	i := 0
	for ; i+2 <= len(code); i += 2 {
		s0 += t[i*pqCentroids+int(code[i])]
		s1 += t[(i+1)*pqCentroids+int(code[i+1])]
	}
	if i < len(code) {
		s0 += t[i*pqCentroids+int(code[i])]
	}
	return s0 + s1
}

func (q *quantizer) encodeBinary() []byte {
	b := []byte{1}
	b = binary.AppendUvarint(b, uint64(q.dim))
	b = binary.AppendUvarint(b, uint64(q.m))
	if q.dotMode {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	for _, cs := range q.cents {
		for _, x := range cs {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
	}
	return b
}

func decodeQuantizer(b []byte) (*quantizer, error) {
	if len(b) == 0 || b[0] != 1 {
		return nil, fmt.Errorf("%w: codebook", ErrCorrupt)
	}
	r := reader{b: b[1:]}
	dim, m := int(r.uvarint()), int(r.uvarint())
	dotMode := r.byte() == 1
	if r.err || m < 1 || dim < m {
		return nil, fmt.Errorf("%w: codebook shape", ErrCorrupt)
	}
	q := newQuantizerShape(dim, m, dotMode)
	for s := range m {
		w := q.starts[s+1] - q.starts[s]
		raw := r.bytes(4 * w * pqCentroids)
		if r.err {
			return nil, fmt.Errorf("%w: short codebook", ErrCorrupt)
		}
		q.cents[s] = make([]float32, w*pqCentroids)
		for i := range q.cents[s] {
			q.cents[s][i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: long codebook", ErrCorrupt)
	}
	return q, nil
}
