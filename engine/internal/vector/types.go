package vector

import (
	"fmt"
	"math"
	"strings"
)

// Metric is a vector embedding's distance function.
type Metric uint8

// The distance functions of a vector embedding policy.
const (
	Cosine     Metric = iota + 1 // similarity in [-1, 1], higher is closer
	DotProduct                   // the dot product, higher is closer
	Euclidean                    // the L2 distance, lower is closer
)

var metricNames = [...]string{"", "cosine", "dotproduct", "euclidean"}

// String returns the metric's name as a policy spells it.
func (m Metric) String() string {
	if int(m) < len(metricNames) {
		return metricNames[m]
	}
	return "?"
}

// ParseMetric reads a distance function's name, in any case ("Cosine",
// "dotproduct", ...).
func ParseMetric(s string) (Metric, bool) {
	switch strings.ToLower(s) {
	case "cosine":
		return Cosine, true
	case "dotproduct":
		return DotProduct, true
	case "euclidean":
		return Euclidean, true
	}
	return 0, false
}

// HigherIsCloser reports whether a larger score means a closer vector: true
// for cosine and dot product (similarities), false for Euclidean (a
// distance). It is the direction in which ORDER BY VectorDistance ranks.
func (m Metric) HigherIsCloser() bool { return m != Euclidean }

// DataType is how a vector embedding's components are stored.
type DataType uint8

// The data types of a vector embedding policy.
const (
	Float32 DataType = iota + 1
	Float16
	Int8
	Uint8
)

var dataTypeNames = [...]string{"", "float32", "float16", "int8", "uint8"}

// String returns the data type's name as a policy spells it.
func (t DataType) String() string {
	if int(t) < len(dataTypeNames) {
		return dataTypeNames[t]
	}
	return "?"
}

// ParseDataType reads a data type's name, in any case.
func ParseDataType(s string) (DataType, bool) {
	switch strings.ToLower(s) {
	case "float32":
		return Float32, true
	case "float16":
		return Float16, true
	case "int8":
		return Int8, true
	case "uint8":
		return Uint8, true
	}
	return 0, false
}

// size is the bytes one component takes.
func (t DataType) size() int {
	switch t {
	case Float16:
		return 2
	case Int8, Uint8:
		return 1
	}
	return 4
}

// Kind is a vector index type.
type Kind uint8

// The vector index types of an indexing policy.
const (
	Flat Kind = iota + 1
	QuantizedFlat
	DiskANN
)

var kindNames = [...]string{"", "flat", "quantizedFlat", "diskANN"}

// String returns the index type's name as a policy spells it.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "?"
}

// ParseKind reads an index type's name, in any case.
func ParseKind(s string) (Kind, bool) {
	switch strings.ToLower(s) {
	case "flat":
		return Flat, true
	case "quantizedflat":
		return QuantizedFlat, true
	case "diskann":
		return DiskANN, true
	}
	return 0, false
}

// Config is what an index needs to know of its embedding and index policy.
type Config struct {
	Kind       Kind
	Dimensions int
	DataType   DataType
	Metric     Metric
	// QuantizationByteSize is the bytes of a product-quantized code
	// (quantizedFlat); 0 picks Dimensions/8, at least 1.
	QuantizationByteSize int
	// SearchListSize is the beam width used while inserting into a diskANN
	// graph (indexingSearchListSize); 0 means 100.
	SearchListSize int
	// MaxDegree bounds the out-degree of a diskANN node; 0 means 64.
	MaxDegree int
}

// withDefaults fills in the zero fields.
func (c Config) withDefaults() Config {
	if c.DataType == 0 {
		c.DataType = Float32
	}
	if c.Metric == 0 {
		c.Metric = Cosine
	}
	if c.QuantizationByteSize <= 0 {
		c.QuantizationByteSize = max(1, c.Dimensions/8)
	}
	c.QuantizationByteSize = min(c.QuantizationByteSize, c.Dimensions)
	if c.SearchListSize <= 0 {
		c.SearchListSize = 100
	}
	if c.MaxDegree <= 0 {
		c.MaxDegree = 64
	}
	return c
}

func (c Config) check() error {
	if c.Dimensions < 1 {
		return fmt.Errorf("vector: %d dimensions", c.Dimensions)
	}
	if c.Kind < Flat || c.Kind > DiskANN {
		return fmt.Errorf("vector: unknown index kind %d", c.Kind)
	}
	if c.DataType < Float32 || c.DataType > Uint8 || c.Metric < Cosine || c.Metric > Euclidean {
		return fmt.Errorf("vector: unknown data type or metric")
	}
	return nil
}

// Normalize returns the vector as the index stores it for cfg: each
// component rounded to the data type (float16 to half precision), or ok false
// when the vector does not fit the embedding: another number of dimensions, a
// component that is not finite, or one outside the range of an integer type or
// not whole. The service leaves such an item out of the index (and
// VectorDistance on it is undefined).
func Normalize(cfg Config, v []float64) ([]float32, bool) {
	if len(v) != cfg.Dimensions {
		return nil, false
	}
	out := make([]float32, len(v))
	for i, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, false
		}
		switch cfg.DataType {
		case Int8:
			if x != math.Trunc(x) || x < -128 || x > 127 {
				return nil, false
			}
		case Uint8:
			if x != math.Trunc(x) || x < 0 || x > 255 {
				return nil, false
			}
		case Float16:
			if math.Abs(x) > 65504 {
				return nil, false
			}
			out[i] = halfToFloat(floatToHalf(float32(x)))
			continue
		default:
			if math.Abs(x) > math.MaxFloat32 {
				return nil, false
			}
		}
		out[i] = float32(x)
	}
	return out, true
}
