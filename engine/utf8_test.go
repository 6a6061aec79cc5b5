package engine

import (
	"strings"
	"testing"
)

// The engine refuses item bodies that are not valid UTF-8 whoever calls it
// (the server refuses them first; seeds, imports and scripts come here
// directly), and nothing is stored.
func TestInvalidUTF8ItemsAreRefusedByTheEngine(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	bad := "{\"id\":\"1\",\"pk\":\"a\",\"name\":\"caf\xe9\"}"
	for name, op := range map[string]func() (*ItemResult, error){
		"create":  func() (*ItemResult, error) { return e.CreateItem(ctx, req("", "a", bad)) },
		"upsert":  func() (*ItemResult, error) { return e.UpsertItem(ctx, req("", "a", bad)) },
		"replace": func() (*ItemResult, error) { return e.ReplaceItem(ctx, req("1", "a", bad)) },
	} {
		_, err := op()
		if statusOf(err) != 400 || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Fatalf("%s: %v, want 400 naming UTF-8", name, err)
		}
	}
	if _, err := e.ReadItem(ctx, req("1", "a", "")); statusOf(err) != 404 {
		t.Fatalf("read after refused writes: %v", err)
	}
	if _, err := e.CreateItem(ctx, req("", "a", `{"id":"1","pk":"a","name":"café"}`)); err != nil {
		t.Fatalf("valid UTF-8: %v", err)
	}
}
