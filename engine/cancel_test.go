package engine

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/pebble"
)

// A request whose context has ended changes nothing and is answered 408
// RequestTimeout (never 500, a server fault): item writes, a transactional
// batch, a delete by partition key and catalog changes, on a store of one
// process and on a shared one (PostgreSQL in the suite's second pass).
func TestRequestWithAnEndedContextChangesNothing(t *testing.T) {
	stores := map[string]func(t *testing.T) storage.Store{
		"memory": func(t *testing.T) storage.Store { return memory.New() },
		"pebble": func(t *testing.T) storage.Store {
			s, err := pebble.Open(t.TempDir(), pebble.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"shared": func(t *testing.T) storage.Store { return memory.NewShared() },
	}
	if testOnPostgres {
		stores = map[string]func(t *testing.T) storage.Store{
			"postgres": func(t *testing.T) storage.Store { return newTestStore(t) },
		}
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			live := t.Context()
			e := openTestEngine(t, open(t))
			if _, err := e.CreateItem(live, req("", "a", `{"id":"1","pk":"a","v":1}`)); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(live)
			cancel()
			ops := map[string]func() error{
				"create":  func() error { _, err := e.CreateItem(ctx, req("", "a", `{"id":"2","pk":"a"}`)); return err },
				"upsert":  func() error { _, err := e.UpsertItem(ctx, req("", "a", `{"id":"1","pk":"a","v":2}`)); return err },
				"replace": func() error { _, err := e.ReplaceItem(ctx, req("1", "a", `{"id":"1","pk":"a","v":3}`)); return err },
				"delete":  func() error { _, err := e.DeleteItem(ctx, req("1", "a", "")); return err },
				"patch": func() error {
					_, err := e.PatchItem(ctx, req("1", "a", `{"operations":[{"op":"set","path":"/v","value":4}]}`))
					return err
				},
				"batch": func() error {
					_, err := e.ExecuteBatch(ctx, &BatchRequest{Database: "db", Container: "c", PartitionKey: StringKey("a"),
						HasPartitionKey: true, Atomic: true, Operations: []BatchOperation{
							{Type: BatchCreate, Body: []byte(`{"id":"3","pk":"a"}`)},
							{Type: BatchDelete, ID: "1"},
						}})
					return err
				},
				"delete by partition key": func() error {
					_, err := e.DeleteAllItemsByPartitionKey(ctx, "db", "c", StringKey("a"))
					return err
				},
				"create container": func() error {
					_, err := e.CreateContainer(ctx, "db", []byte(`{"id":"c2","partitionKey":{"paths":["/pk"]}}`), nil)
					return err
				},
				"delete container": func() error { return e.DeleteContainer(ctx, "db", "c", "") },
			}
			for op, run := range ops {
				err := run()
				if err == nil {
					t.Errorf("%s with an ended context succeeded", op)
					continue
				}
				if !errors.Is(err, context.Canceled) && StatusOf(err) != 408 {
					t.Errorf("%s with an ended context: %v, want the context's error", op, err)
				}
				if got := StatusOf(err); got != 408 {
					t.Errorf("%s with an ended context is answered %d (%v), want 408", op, got, err)
				}
			}
			res, err := e.ReadItem(live, req("1", "a", ""))
			if err != nil {
				t.Fatalf("the item after the cancelled requests: %v", err)
			}
			if !bytes.Contains(res.Body, []byte(`"v":1`)) {
				t.Errorf("the item after the cancelled requests is %s, want v 1", res.Body)
			}
			for _, id := range []string{"2", "3"} {
				if _, err := e.ReadItem(live, req(id, "a", "")); StatusOf(err) != 404 {
					t.Errorf("item %s after its cancelled create: %v, want 404", id, err)
				}
			}
			if _, err := e.ReadContainer(live, "db", "c2"); StatusOf(err) != 404 {
				t.Errorf("container c2 after its cancelled create: %v, want 404", err)
			}
		})
	}
}
