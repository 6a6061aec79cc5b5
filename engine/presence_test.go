package engine

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage/memory"
)

// TestCreatesRaceThePresenceBuild reopens an engine on a store with items
// and at once creates the same ids (and new ones) from many goroutines,
// while the filter is still being built: every existing id answers 409 and
// every new id is created exactly once.
func TestCreatesRaceThePresenceBuild(t *testing.T) {
	ctx := t.Context()
	skipOnPostgres(t, "the per-process presence filter, off on a shared store")
	store := memory.New()
	e, err := Open(ctx, store, Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	const existing = 20_000
	for i := range existing {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"old%d","pk":"p%d"}`, i, i%16))
	}
	e.Close()

	for round := range 3 {
		e, err := Open(ctx, store, Options{SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		var created, conflicts [16]int
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < existing; i += 16 * 50 {
					for _, id := range []string{fmt.Sprintf("old%d", i), fmt.Sprintf("new%d-%d", round, i/2)} {
						_, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: "c",
							Body: fmt.Appendf(nil, `{"id":%q,"pk":"p%d"}`, id, i%16)})
						switch {
						case err == nil:
							created[w]++
						case StatusOf(err) == 409:
							conflicts[w]++
						default:
							t.Error(err)
						}
					}
				}
			}()
		}
		wg.Wait()
		var nc, nx int
		for w := range 16 {
			nc += created[w]
			nx += conflicts[w]
		}
		// Ids i and i+1 share new%d-%d when i is even: one create each.
		if wantConflicts := existing / 50; nx < wantConflicts || nc+nx != 2*existing/50 {
			t.Fatalf("round %d: %d created and %d conflicts, want every one of the %d old ids to conflict", round, nc, nx, wantConflicts)
		}
		deadline := time.Now().Add(10 * time.Second)
		for f := e.presence.of(mustContainerNamed(t, e, "c")); !f.Ready(); {
			if time.Now().After(deadline) {
				t.Fatal("the presence filter is not ready after 10 s")
			}
			time.Sleep(time.Millisecond)
		}
		if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: "c", Body: []byte(`{"id":"old7","pk":"p7"}`)}); StatusOf(err) != 409 {
			t.Fatalf("round %d: creating an existing id with the filter ready: %v, want 409", round, err)
		}
		e.Close()
	}
}

func mustContainerNamed(t *testing.T, e *Engine, name string) *Container {
	ctx := t.Context()
	t.Helper()
	c, err := e.Container(ctx, "db", name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
