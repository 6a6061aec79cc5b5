package searchindex

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestEmbeddingsParseAsJSONNumbers: the write path's reader of embeddings
// takes exactly the JSON arrays of numbers encoding/json takes.
func TestEmbeddingsParseAsJSONNumbers(t *testing.T) {
	for _, raw := range []string{`[]`, `[1]`, ` [ 1 , -2.5e3 ,0.25 ] `, `[1,]`, `[,1]`, `[1 2]`, `[01]`, `[1.]`, `[+1]`, `["1"]`, `[1,[2]]`, `[1e400]`, `{}`, `1`, `[1]x`, `[-]`, `[1e5, 2E-3]`, `[`, `[-0]`, `[1e+2]`} {
		var want []float64
		wantOK := json.Unmarshal([]byte(raw), &want) == nil
		got, ok := parseNumberArray([]byte(raw))
		if ok != wantOK || ok && !slices.Equal(got, want) {
			t.Errorf("%s: %v %v, encoding/json %v %v", raw, got, ok, want, wantOK)
		}
	}
}
