package engine

import (
	"fmt"
	"slices"
	"sort"
	"testing"
)

// TestPageResourcesResumesAfterTheLastID reads a feed of resources two at a
// time while others are created and deleted between pages: each resource
// there all along is listed exactly once.
func TestPageResourcesResumesAfterTheLastID(t *testing.T) {
	ids := []string{"b", "d", "f", "h", "j"}
	list := func() []*Resource {
		out := make([]*Resource, len(ids))
		for i, id := range ids {
			out[i] = &Resource{ID: id, Body: fmt.Appendf(nil, `{"id":%q}`, id)}
		}
		return out
	}
	var seen []string
	continuation := ""
	for page := 0; ; page++ {
		res, err := PageResources(list(), 2, continuation)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range res.Items {
			seen = append(seen, string(it))
		}
		if res.Continuation == "" {
			break
		}
		continuation = res.Continuation
		// Between pages: one created before the position, one deleted.
		ids = append(ids, fmt.Sprintf("a%d", page))
		sort.Strings(ids)
		if page == 0 {
			ids = slices.DeleteFunc(ids, func(id string) bool { return id == "h" })
		}
	}
	want := []string{`{"id":"b"}`, `{"id":"d"}`, `{"id":"f"}`, `{"id":"j"}`}
	if !slices.Equal(seen, want) {
		t.Fatalf("pages listed %v, want %v", seen, want)
	}
	if _, err := PageResources(list(), 2, "not a token"); StatusOf(err) != 400 {
		t.Fatalf("a bad continuation: %v, want 400", err)
	}
}
