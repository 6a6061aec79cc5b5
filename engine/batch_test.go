package engine

import (
	"strings"
	"testing"
)

func TestParseBatch(t *testing.T) {
	many := "[" + strings.TrimSuffix(strings.Repeat(`{"operationType":"Read","id":"1"},`, 101), ",") + "]"
	huge := `[{"operationType":"Create","resourceBody":{"id":"1","s":"` + strings.Repeat("x", MaxBatchBytes) + `"}}]`
	tests := []struct {
		name   string
		body   string
		status int    // of the whole request; 0 when it parses
		opErr  string // of the first operation, when it is invalid
	}{
		{"every operation type", `[{"operationType":"Create","resourceBody":{"id":"1"}},{"operationType":"Upsert","resourceBody":{"id":"1"}},{"operationType":"Replace","id":"1","resourceBody":{"id":"1"}},{"operationType":"Patch","id":"1","resourceBody":{"operations":[{"op":"remove","path":"/a"}]}},{"operationType":"Read","id":"1"},{"operationType":"Delete","id":"1","ifMatch":"\"e\""}]`, 0, ""},
		{"bulk partition key", `[{"operationType":"Read","id":"1","partitionKey":"[\"a\"]"}]`, 0, ""},
		{"not an array", `{"operationType":"Read"}`, 400, ""},
		{"no operations", `[]`, 400, ""},
		{"101 operations", many, 400, ""},
		{"over 2 MB", huge, 413, ""},
		{"unknown type", `[{"operationType":"Merge","id":"1"}]`, 0, `operationType "Merge"`},
		{"read without id", `[{"operationType":"Read"}]`, 0, "has no id"},
		{"create without body", `[{"operationType":"Create"}]`, 0, "has no resourceBody"},
		{"bad patch", `[{"operationType":"Patch","id":"1","resourceBody":{"operations":[{"op":"incr","path":"/a","value":"x"}]}}]`, 0, "incr needs a number"},
		{"bad partition key", `[{"operationType":"Read","id":"1","partitionKey":"a"}]`, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := ParseBatch([]byte(tc.body))
			if tc.status != 0 {
				if StatusOf(err) != tc.status {
					t.Fatalf("error %v, want status %d", err, tc.status)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseBatch: %v", err)
			}
			inv := ops[0].invalid
			switch {
			case tc.name == "bad partition key":
				if inv == nil || inv.Status != 400 {
					t.Errorf("invalid = %v, want a 400", inv)
				}
			case tc.opErr == "" && inv != nil:
				t.Errorf("operation invalid: %v", inv)
			case tc.opErr != "" && (inv == nil || !strings.Contains(inv.Message, tc.opErr)):
				t.Errorf("invalid = %v, want a message containing %q", inv, tc.opErr)
			}
		})
	}
}

func TestParseBatchMalformedOperation(t *testing.T) {
	ops, err := ParseBatch([]byte(`[{"operationType":"Read","id":"1"},{"operationType":"Read","id":5},"x"]`))
	if err != nil {
		t.Fatalf("ParseBatch: %v", err)
	}
	if ops[0].invalid != nil || ops[1].invalid == nil || ops[2].invalid == nil {
		t.Errorf("only operations 1 and 2 should be invalid: %v, %v, %v", ops[0].invalid, ops[1].invalid, ops[2].invalid)
	}
}
