package engine

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// Gateways that open one shared store at once, written by a build before
// containers always had an offer, give each offerless container one
// default offer between them, not one each.
func TestGatewaysOpeningAnOlderSharedStoreAtOnceGiveOneOfferPerContainer(t *testing.T) {
	ctx := t.Context()
	for round := range 20 {
		store, open := newTestShared(t)
		e, err := Open(ctx, store, Options{})
		if err != nil {
			t.Fatal(err)
		}
		e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
		for _, id := range []string{"a", "b", "c"} {
			if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"`+id+`","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}`), nil); err != nil {
				t.Fatal(err)
			}
			c, _ := e.Container(ctx, "db", id)
			b := store.NewBatch()
			b.Delete(keys.OfferKey(c.offer))
			rec := c.record
			rec.Offer = ""
			raw, _ := json.Marshal(rec)
			b.Set(keys.ContainerKey(c.db.rid, c.ID), raw)
			if err := b.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			b.Close()
		}
		e.Close()

		engines := make([]*Engine, 3)
		stores := []storage.Shared{open(), open(), open()}
		var wg sync.WaitGroup
		for i := range engines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				eng, err := Open(ctx, stores[i], Options{})
				if err != nil {
					t.Error(err)
					return
				}
				engines[i] = eng
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		for i, eng := range engines {
			if n := len(eng.ListOffers(ctx)); n != 3 {
				t.Fatalf("round %d: gateway %d sees %d offers for 3 containers, want 3", round, i, n)
			}
		}
		for _, eng := range engines {
			eng.Close()
		}
		store.Close()
		for _, s := range stores {
			s.Close()
		}
	}
}
