package vector

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The service's limits on vector policies.
const (
	MaxDimensions     = 4096 // of an embedding
	MaxFlatDimensions = 505  // of an embedding a flat index holds
	MaxQuantization   = 512  // quantizationByteSize, at most (and at most the dimensions)
	MinSearchListSize = 25   // indexingSearchListSize
	MaxSearchListSize = 500
	MaxShardPaths     = 1 // vectorIndexShardKey
	// DefaultDimensions is an embedding's when the policy gives none.
	DefaultDimensions = 1536
)

// PolicyError is a container policy the service refuses: a 400
// (BadRequest) whose message is the service's.
type PolicyError struct{ Message string }

// Error returns the service's message.
func (e *PolicyError) Error() string { return e.Message }

func policyErr(format string, args ...any) error {
	return &PolicyError{Message: fmt.Sprintf(format, args...)}
}

// errInvalidInput is the service's answer to a policy of the wrong JSON
// shape.
var errInvalidInput = &PolicyError{Message: "One of the specified inputs is invalid"}

// EmbeddingSpec is one entry of a vectorEmbeddingPolicy, as written.
type EmbeddingSpec struct {
	Path             string `json:"path"`
	DataType         string `json:"dataType"`
	Dimensions       *int64 `json:"dimensions"`
	DistanceFunction string `json:"distanceFunction"`
}

// IndexSpec is one entry of indexingPolicy.vectorIndexes, as written.
type IndexSpec struct {
	Path                   string   `json:"path"`
	Type                   string   `json:"type"`
	QuantizerType          string   `json:"quantizerType"`
	QuantizationByteSize   *int64   `json:"quantizationByteSize"`
	IndexingSearchListSize *int64   `json:"indexingSearchListSize"`
	VectorIndexShardKey    []string `json:"vectorIndexShardKey"`
}

// Embedding is a validated embedding.
type Embedding struct {
	Path       string
	DataType   DataType
	Dimensions int
	Metric     Metric
}

// IndexPolicy is a validated vector index: its embedding and its Config.
type IndexPolicy struct {
	Path      string
	Config    Config
	ShardKey  []string
	Quantizer string
}

// Policy is a container's validated vector search policy: its embeddings
// and its vector indexes. The engine keeps the policies' JSON as the client
// wrote it and answers with it; Policy is what it computes with.
type Policy struct {
	Embeddings []Embedding
	Indexes    []IndexPolicy
}

// Embedding returns the embedding declared at path ("/a/b").
func (p *Policy) Embedding(path string) (Embedding, bool) {
	if p != nil {
		for _, e := range p.Embeddings {
			if e.Path == path {
				return e, true
			}
		}
	}
	return Embedding{}, false
}

// Index returns the vector index of path.
func (p *Policy) Index(path string) (IndexPolicy, bool) {
	if p != nil {
		for _, ix := range p.Indexes {
			if ix.Path == path {
				return ix, true
			}
		}
	}
	return IndexPolicy{}, false
}

// RangeExclusions returns the range-index paths the engine leaves out for
// the vector indexes ("/embedding/*"): a vector is indexed by its vector
// index, never value by value.
func (p *Policy) RangeExclusions() []string {
	var out []string
	if p != nil {
		for _, ix := range p.Indexes {
			out = append(out, ix.Path+"/*")
		}
	}
	return out
}

// ParsePolicy validates a container's vectorEmbeddingPolicy and
// indexingPolicy.vectorIndexes (each nil when absent) with the service's
// rules and messages; included are the indexing policy's includedPaths, of
// which none may hold a vector index's path (its vectors are indexed by the
// vector index, not the range index). Errors are *PolicyError.
func ParsePolicy(embeddingPolicy, vectorIndexes json.RawMessage, included []string) (*Policy, error) {
	var specs struct {
		VectorEmbeddings []EmbeddingSpec `json:"vectorEmbeddings"`
	}
	var ixSpecs []IndexSpec
	if len(embeddingPolicy) > 0 && string(embeddingPolicy) != "null" {
		if err := strictDecode(embeddingPolicy, &specs); err != nil {
			return nil, err
		}
	}
	if len(vectorIndexes) > 0 && string(vectorIndexes) != "null" {
		if err := strictDecode(vectorIndexes, &ixSpecs); err != nil {
			return nil, err
		}
	}
	p := &Policy{}
	for _, s := range specs.VectorEmbeddings {
		e, err := checkEmbedding(s)
		if err != nil {
			return nil, err
		}
		if _, dup := p.Embedding(e.Path); dup {
			return nil, policyErr("The Vector Embedding Policy has a duplicate Path: %s.", e.Path)
		}
		p.Embeddings = append(p.Embeddings, e)
	}
	for _, s := range ixSpecs {
		ix, err := p.checkIndex(s)
		if err != nil {
			return nil, err
		}
		if _, dup := p.Index(ix.Path); dup {
			return nil, policyErr("The Vector Indexing Policy has a duplicate path::%s.", ix.Path)
		}
		for _, inc := range included {
			inc = strings.TrimSuffix(strings.TrimSuffix(inc, "/*"), "/?")
			if inc == ix.Path || strings.HasPrefix(inc, ix.Path+"/") {
				return nil, policyErr("The Vector Indexing Policy's path::%s is in the indexing policy's includedPaths (%s): a vector path must be excluded from the range index.", ix.Path, inc)
			}
		}
		p.Indexes = append(p.Indexes, ix)
	}
	return p, nil
}

// strictDecode decodes JSON, mapping a value of the wrong type to the
// service's "One of the specified inputs is invalid".
func strictDecode(raw json.RawMessage, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return errInvalidInput
		}
		return &PolicyError{Message: "One of the specified inputs is invalid: " + err.Error()}
	}
	return nil
}

// validPath reports whether p is a property path: "/a/b", no wildcards.
func validPath(p string) bool {
	if !strings.HasPrefix(p, "/") || len(p) < 2 {
		return false
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "*" || seg == "?" || strings.Contains(seg, "[]") {
			return false
		}
	}
	return true
}

func checkEmbedding(s EmbeddingSpec) (Embedding, error) {
	if !validPath(s.Path) {
		return Embedding{}, policyErr("The Vector Embedding Policy contains an invalid Path: %s.", s.Path)
	}
	e := Embedding{Path: s.Path, DataType: Float32, Metric: Cosine, Dimensions: DefaultDimensions}
	if s.DataType != "" {
		t, ok := ParseDataType(s.DataType)
		if !ok {
			return Embedding{}, policyErr("The Vector Embedding Policy has an invalid DataType:%s. Valid data types are float32, float16, int8 and uint8.", s.DataType)
		}
		e.DataType = t
	}
	if s.DistanceFunction != "" {
		m, ok := ParseMetric(s.DistanceFunction)
		if !ok {
			return Embedding{}, policyErr("The Vector Embedding Policy has an invalid DistanceFunction:%s. Valid distance functions are cosine, dotproduct and euclidean.", s.DistanceFunction)
		}
		e.Metric = m
	}
	if s.Dimensions != nil {
		d := *s.Dimensions
		switch {
		case d > MaxDimensions:
			return Embedding{}, policyErr("The Vector Embedding Policy has Dimensions:%d which is more than the maximum supported value of %d.", d, MaxDimensions)
		case d < 1:
			return Embedding{}, policyErr("The Vector Embedding Policy has Dimensions:%d which is less than the minimum supported value of 1.", d)
		}
		e.Dimensions = int(d)
	}
	return e, nil
}

func (p *Policy) checkIndex(s IndexSpec) (IndexPolicy, error) {
	emb, ok := p.Embedding(s.Path)
	if !ok {
		return IndexPolicy{}, policyErr("The Vector Indexing Policy's path::%s not matching in Embedding's path.", s.Path)
	}
	kind, ok := ParseKind(s.Type)
	if !ok {
		return IndexPolicy{}, policyErr("The Vector Indexing Policy's Index Type::%s is invalid, Valid types are 'flat', 'quantizedFlat' or 'diskANN'.", s.Type)
	}
	if kind == Flat && emb.Dimensions > MaxFlatDimensions {
		return IndexPolicy{}, policyErr("The Vector Indexing Policy's Index Type::flat supports at most %d dimensions, but the Vector Embedding Policy has Dimensions:%d for path::%s.", MaxFlatDimensions, emb.Dimensions, s.Path)
	}
	ix := IndexPolicy{Path: s.Path, Quantizer: s.QuantizerType,
		Config: Config{Kind: kind, Dimensions: emb.Dimensions, DataType: emb.DataType, Metric: emb.Metric}}
	if s.QuantizationByteSize != nil {
		if kind == Flat {
			return IndexPolicy{}, policyErr("The Vector Indexing Policy parameter QuantizationByteSize is not supported by Index Type::flat.")
		}
		hi := int64(min(emb.Dimensions, MaxQuantization))
		if q := *s.QuantizationByteSize; q < 1 || q > hi {
			return IndexPolicy{}, policyErr("The Vector Indexing Policy parameter QuantizationByteSize value :: %d is out of range. The allowed range is between 1 and %d.", q, hi)
		}
		ix.Config.QuantizationByteSize = int(*s.QuantizationByteSize)
	}
	if s.QuantizerType != "" {
		switch strings.ToLower(s.QuantizerType) {
		case "product", "spherical":
		default:
			return IndexPolicy{}, policyErr("The Vector Indexing Policy has an invalid QuantizerType:%s. Valid quantizer types are product and spherical.", s.QuantizerType)
		}
		if kind == Flat {
			return IndexPolicy{}, policyErr("The Vector Indexing Policy parameter QuantizerType is not supported by Index Type::flat.")
		}
	}
	if s.IndexingSearchListSize != nil {
		if kind != DiskANN {
			return IndexPolicy{}, policyErr("The Vector Indexing Policy parameter IndexingSearchListSize is only supported by Index Type::diskANN.")
		}
		if l := *s.IndexingSearchListSize; l < MinSearchListSize || l > MaxSearchListSize {
			return IndexPolicy{}, policyErr("The Vector Indexing Policy parameter IndexingSearchListSize value :: %d is out of range. The allowed range is between %d and %d.", l, MinSearchListSize, MaxSearchListSize)
		}
		ix.Config.SearchListSize = int(*s.IndexingSearchListSize)
	}
	if s.VectorIndexShardKey != nil {
		if kind == Flat {
			return IndexPolicy{}, policyErr("The Vector Indexing Policy parameter VectorIndexShardKey is not supported by Index Type::flat.")
		}
		if len(s.VectorIndexShardKey) > MaxShardPaths {
			return IndexPolicy{}, policyErr("The number of shard paths defined in the Vector Indexing Policy: %d exceeds the maximum: %d.", len(s.VectorIndexShardKey), MaxShardPaths)
		}
		for _, sp := range s.VectorIndexShardKey {
			if !validPath(sp) {
				return IndexPolicy{}, policyErr("The Vector Indexing Policy has an invalid Shard Path: %s.", sp)
			}
		}
		ix.ShardKey = s.VectorIndexShardKey
	}
	return ix, nil
}

// CheckReplace applies the service's rule for a container replace: the
// embeddings and vector indexes a container has cannot change (new ones
// may be added); old and new are the policies before and after.
func CheckReplace(old, new *Policy) error {
	if old == nil {
		return nil
	}
	for _, e := range old.Embeddings {
		if n, ok := new.Embedding(e.Path); !ok || n != e {
			return policyErr("Paths in existing embedding policy cannot be modified in Collection Replace")
		}
	}
	for _, ix := range old.Indexes {
		n, ok := new.Index(ix.Path)
		if !ok || n.Config != ix.Config || n.Quantizer != ix.Quantizer || strings.Join(n.ShardKey, "\x00") != strings.Join(ix.ShardKey, "\x00") {
			return policyErr("Paths in existing vector indexing policy cannot be modified in Collection Replace")
		}
	}
	return nil
}
