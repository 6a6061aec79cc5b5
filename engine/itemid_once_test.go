package engine

import (
	"encoding/json"
	"strings"
	"testing"
)

// A replace's body id is checked unless it is the request's, checked
// already: a body of another id is refused by validItemID's words
// whatever the request's id, and one of the request's valid id is not
// refused; for single replaces and for a batch's.
func TestABodysIDIsCheckedUnlessItIsTheRequestsCheckedID(t *testing.T) {
	e, _ := newTestEngine(t)
	ctx := t.Context()
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash"}}`)
	for _, id := range []string{"a", "b c", "x y"} {
		upsert(t, e, "c", `{"id":"`+id+`","pk":"p"}`)
	}
	message := func(err error) string {
		if err == nil {
			return ""
		}
		ae, ok := AsError(err)
		if !ok {
			return err.Error()
		}
		return ae.Message
	}
	for _, tc := range []struct{ reqID, bodyID string }{
		{"a", ""}, {"a", " "}, {"a", "\t\n "}, {"b c", strings.Repeat("x", 1024)}, {"x y", "\u00a0"},
		{"a", "a/b"}, {"b c", "b c"}, {"x y", "x y"}, {"a", "a"},
	} {
		body, _ := json.Marshal(map[string]string{"id": tc.bodyID, "pk": "p"})
		want := ""
		if e := validItemID(tc.bodyID); e != nil {
			want = e.Message
		}
		_, err := e.ReplaceItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: tc.reqID, Body: body, PartitionKey: StringKey("p"), HasPartitionKey: true})
		if want == "" && tc.reqID != tc.bodyID {
			continue // another valid id: refused for the mismatch
		}
		if got := message(err); got != want {
			t.Errorf("replace %q with a body of id %q: %q, want %q", tc.reqID, tc.bodyID, got, want)
		}
		id := tc.reqID
		res, err := e.ExecuteBatch(ctx, &BatchRequest{Database: "db", Container: "c", PartitionKey: StringKey("p"), HasPartitionKey: true,
			Operations: []BatchOperation{{Type: BatchReplace, ID: id, Body: body}}})
		got := message(err)
		if err == nil && len(res.Results) == 1 && res.Results[0].Status >= 400 {
			got = res.Results[0].Message
		}
		if got != want {
			t.Errorf("batch replace %q with a body of id %q: %q, want %q", tc.reqID, tc.bodyID, got, want)
		}
	}
}
