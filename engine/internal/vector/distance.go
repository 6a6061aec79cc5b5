package vector

import "math"

// dot returns the dot product of a and b, which have the same length.
func dot(a, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	if useAVX2 {
		return dotAVX2(&a[0], &b[0], len(a))
	}
	return dotGo(a, b)
}

// l2sq returns the squared Euclidean distance of a and b.
func l2sq(a, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	if useAVX2 {
		return l2sqAVX2(&a[0], &b[0], len(a))
	}
	return l2sqGo(a, b)
}

func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

func l2sqGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		d0, d1, d2, d3 := a[i]-b[i], a[i+1]-b[i+1], a[i+2]-b[i+2], a[i+3]-b[i+3]
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; i < len(a); i++ {
		d := a[i] - b[i]
		s0 += d * d
	}
	return s0 + s1 + s2 + s3
}

// norm returns the Euclidean norm of v.
func norm(v []float32) float64 { return math.Sqrt(float64(dot(v, v))) }

// normalized returns v scaled to unit length (v itself when it is zero).
func normalized(v []float32) []float32 {
	n := norm(v)
	out := make([]float32, len(v))
	if n == 0 {
		copy(out, v)
		return out
	}
	for i, x := range v {
		out[i] = float32(float64(x) / n)
	}
	return out
}

// Score computes the service's VectorDistance of a and b under m: the cosine
// similarity, the dot product or the Euclidean distance, in float64 as the
// service returns it. A cosine with a zero vector is 0.
func Score(m Metric, a, b []float32) float64 {
	switch m {
	case DotProduct:
		return float64(dot(a, b))
	case Euclidean:
		return math.Sqrt(float64(l2sq(a, b)))
	}
	na, nb := norm(a), norm(b)
	if na == 0 || nb == 0 {
		return 0
	}
	return float64(dot(a, b)) / (na * nb)
}
