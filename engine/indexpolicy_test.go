package engine

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestIndexingPolicyIsValidatedAsTheServiceValidatesIt(t *testing.T) {
	for _, tc := range []struct{ policy, want string }{
		{`{"includedPaths":[{"path":5}],"indexingMode":"weird"}`, "indexing mode 'weird' is invalid"},
		{`{"includedPaths":[{"path":5}]}`, "The indexing path 5 in includedPaths[0]"},
		{`{"excludedPaths":[{"path":"a/?"}]}`, "failed near position 0"},
		{`{"includedPaths":[{"path":"/a"}]}`, "failed near position 2"},
		{`{"includedPaths":["/*"]}`, "includedPaths[0] must be an object"},
		{`{"automatic":1}`, "automatic value 1 is invalid"},
		{`[]`, "must be a JSON object"},
		{`null`, ""},
		{`{}`, ""},
		{`{"indexingMode":"NONE","automatic":false,"includedPaths":[],"excludedPaths":[]}`, ""},
		{`{"indexingMode":"lazy","includedPaths":[{"path":"/*","indexes":[{"kind":"Range","dataType":"Number"}]}],"excludedPaths":[{"path":"/\"_etag\"/?"},{"path":"/a/[]/?"}]}`, ""},
	} {
		var v any
		if err := json.Unmarshal([]byte(tc.policy), &v); err != nil {
			t.Fatal(err)
		}
		err := validateIndexingPolicy(v)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.policy, err)
		case tc.want != "" && (err == nil || err.Status != 400 || !strings.Contains(err.Message, tc.want)):
			t.Errorf("%s: %v, want a 400 with %q", tc.policy, err, tc.want)
		}
	}
}
