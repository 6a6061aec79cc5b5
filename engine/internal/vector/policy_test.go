package vector

import (
	"encoding/json"
	"strings"
	"testing"
)

const embeddings = `{"vectorEmbeddings":[
	{"path":"/vector1","dataType":"float32","dimensions":256,"distanceFunction":"euclidean"},
	{"path":"/vector2","dataType":"int8","dimensions":200,"distanceFunction":"dotproduct"},
	{"path":"/vector3","dataType":"uint8","dimensions":600,"distanceFunction":"cosine"}]}`

// A policy the service takes is taken, with its configuration per index.
func TestPolicyTakesWhatTheServiceTakes(t *testing.T) {
	p, err := ParsePolicy(json.RawMessage(embeddings), json.RawMessage(`[
		{"path":"/vector1","type":"flat"},
		{"path":"/vector2","type":"quantizedFlat","quantizerType":"product","quantizationByteSize":8},
		{"path":"/vector3","type":"diskANN","quantizerType":"product","quantizationByteSize":8,"vectorIndexShardKey":["/city"],"indexingSearchListSize":50}]`),
		[]string{"/*"})
	if err != nil {
		t.Fatal(err)
	}
	ix, _ := p.Index("/vector3")
	if ix.Config != (Config{Kind: DiskANN, Dimensions: 600, DataType: Uint8, Metric: Cosine, QuantizationByteSize: 8, SearchListSize: 50}) {
		t.Fatalf("diskANN config %+v", ix.Config)
	}
	if strings.Join(p.RangeExclusions(), ",") != "/vector1/*,/vector2/*,/vector3/*" {
		t.Fatalf("exclusions %v", p.RangeExclusions())
	}
	// Defaults: float32, cosine, 1536 dimensions.
	p, err = ParsePolicy(json.RawMessage(`{"vectorEmbeddings":[{"path":"/v"}]}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := p.Embedding("/v"); e != (Embedding{Path: "/v", DataType: Float32, Dimensions: 1536, Metric: Cosine}) {
		t.Fatalf("defaults %+v", e)
	}
	for _, dt := range []string{"float32", "float16", "int8", "uint8"} {
		if _, err := ParsePolicy(json.RawMessage(`{"vectorEmbeddings":[{"path":"/v","dataType":"`+dt+`","dimensions":3}]}`), nil, nil); err != nil {
			t.Errorf("%s: %v", dt, err)
		}
	}
}

// A policy the service refuses is refused with the service's message.
func TestPolicyRefusesWithTheServicesMessages(t *testing.T) {
	for _, tc := range []struct{ emb, idx, want string }{
		{"", `[{"path":"/vector1","type":"flat"}]`, "The Vector Indexing Policy's path::/vector1 not matching in Embedding's path."},
		{embeddings, `[{"path":"/vector1","type":"notFlat"}]`, "The Vector Indexing Policy's Index Type::notFlat is invalid"},
		{embeddings, `[{"path":"/vector4","type":"flat"}]`, "vector4 not matching in Embedding's path"},
		{embeddings, `[{"path":"/vector1","type":"quantizedFlat","quantizationByteSize":0}]`, "The Vector Indexing Policy parameter QuantizationByteSize value :: 0 is out of range. The allowed range is between 1 and 256."},
		{embeddings, `[{"path":"/vector3","type":"quantizedFlat","quantizationByteSize":513}]`, "The Vector Indexing Policy parameter QuantizationByteSize value :: 513 is out of range. The allowed range is between 1 and 512."},
		{embeddings, `[{"path":"/vector1","type":"diskANN","indexingSearchListSize":5}]`, "IndexingSearchListSize value :: 5 is out of range. The allowed range is between 25 and 500."},
		{embeddings, `[{"path":"/vector2","type":"diskANN","vectorIndexShardKey":["country"]}]`, "The Vector Indexing Policy has an invalid Shard Path: country."},
		{embeddings, `[{"path":"/vector2","type":"diskANN","vectorIndexShardKey":["/country","/city","/zipcode"]}]`, "The number of shard paths defined in the Vector Indexing Policy: 3 exceeds the maximum: 1."},
		{embeddings, `[{"path":"/vector2","type":"diskANN","vectorIndexShardKey":"/country"}]`, "One of the specified inputs is invalid"},
		{embeddings, `[{"path":"/vector3","type":"flat"}]`, "supports at most 505 dimensions"},
		{`{"vectorEmbeddings":[{"path":"/v","dataType":"float33","dimensions":3}]}`, "", "Vector Embedding Policy has an invalid DataType"},
		{`{"vectorEmbeddings":[{"path":"/v","dimensions":8000}]}`, "", "The Vector Embedding Policy has Dimensions:8000 which is more than the maximum supported value"},
		{`{"vectorEmbeddings":[{"path":"/v","dimensions":-1}]}`, "", "The Vector Embedding Policy has Dimensions:-1"},
		{`{"vectorEmbeddings":[{"path":"/v","distanceFunction":"handMeasured"}]}`, "", "The Vector Embedding Policy has an invalid DistanceFunction:handMeasured"},
		{`{"vectorEmbeddings":[{"path":"v"}]}`, "", "The Vector Embedding Policy contains an invalid Path: v."},
		{`{"vectorEmbeddings":[{"path":"/v"},{"path":"/v"}]}`, "", "duplicate Path: /v"},
	} {
		_, err := ParsePolicy(json.RawMessage(tc.emb), json.RawMessage(tc.idx), nil)
		pe, ok := err.(*PolicyError)
		if !ok || !strings.Contains(pe.Message, tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.emb, tc.idx, err, tc.want)
		}
	}
	// A vector path the range index names explicitly.
	_, err := ParsePolicy(json.RawMessage(embeddings), json.RawMessage(`[{"path":"/vector1","type":"flat"}]`), []string{"/vector1/?"})
	if err == nil || !strings.Contains(err.Error(), "must be excluded from the range index") {
		t.Errorf("included vector path: %v", err)
	}
}

// A replace keeps the existing embeddings and vector indexes as they are;
// it may add new ones.
func TestPolicyReplaceKeepsExistingVectorPolicies(t *testing.T) {
	mk := func(emb, idx string) *Policy {
		p, err := ParsePolicy(json.RawMessage(emb), json.RawMessage(idx), nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	one := `{"vectorEmbeddings":[{"path":"/vector1","dataType":"float32","dimensions":256,"distanceFunction":"euclidean"}]}`
	old := mk(one, `[{"path":"/vector1","type":"flat"}]`)
	if err := CheckReplace(old, mk(one, `[{"path":"/vector1","type":"flat"}]`)); err != nil {
		t.Fatalf("same policy: %v", err)
	}
	if err := CheckReplace(old, mk(one, `[{"path":"/vector1","type":"quantizedFlat"}]`)); err == nil || err.Error() != "Paths in existing vector indexing policy cannot be modified in Collection Replace" {
		t.Fatalf("index changed: %v", err)
	}
	if err := CheckReplace(old, mk(strings.Replace(one, "256", "384", 1), `[{"path":"/vector1","type":"flat"}]`)); err == nil || err.Error() != "Paths in existing embedding policy cannot be modified in Collection Replace" {
		t.Fatalf("embedding changed: %v", err)
	}
	two := `{"vectorEmbeddings":[{"path":"/vector1","dataType":"float32","dimensions":256,"distanceFunction":"euclidean"},{"path":"/v2","dimensions":3}]}`
	if err := CheckReplace(old, mk(two, `[{"path":"/vector1","type":"flat"},{"path":"/v2","type":"diskANN"}]`)); err != nil {
		t.Fatalf("added: %v", err)
	}
}
