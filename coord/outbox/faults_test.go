package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord"
	"github.com/orrery-db/orrery/coord/internal/cosmostest"
	"github.com/orrery-db/orrery/coord/outbox"
)

// Orders are placed with their messages in the outbox, two relays publish
// them to a consumer that applies each through its inbox, and every kind of
// fault hits all of it at random (the producer's batches, the relays'
// change feed, marks and leases, the consumer's batches), a real split of
// a container among them: each message is applied exactly once, and per
// partition key in the order written.
func TestEachMessageAppliedOnceInOrderUnderRandomFaults(t *testing.T) {
	s := newShop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const customers, orders = 4, 40
	for c := range customers {
		b, _ := json.Marshal(map[string]any{"id": "balance", "customer": customerOf(c), "orders": 0, "seqs": []int{}})
		if _, err := s.ledger.CreateItem(ctx, azcosmos.NewPartitionKeyString(customerOf(c)), b, nil); err != nil {
			t.Fatal(err)
		}
	}
	s.server.AddFaults(t, cosmostest.RandomRules(cosmostest.Seed(t), cosmostest.Condition{Database: s.db.ID()}, 0.03, 1)...)

	// The consumer: the order's sequence number appended to its
	// customer's list, once per message, the marker in the same batch. An
	// error (a lost reply among them) is the relay's to retry.
	consume := publisherFunc(func(ctx context.Context, m outbox.Message) error {
		var p struct{ Seq int }
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			return err
		}
		_, err := s.in.Handle(ctx, m.PartitionKey, m.ID, func(ctx context.Context, b *azcosmos.TransactionalBatch) error {
			ops := azcosmos.PatchOperations{}
			ops.AppendIncrement("/orders", 1)
			ops.AppendAdd("/seqs/-", p.Seq)
			b.PatchItem("balance", ops, nil)
			return nil
		})
		return err
	})
	s.startRelay("r0", consume)
	s.startRelay("r1", consume)

	// The producer retries what failed; a batch whose reply was lost may
	// have committed, and its retry then fails on the order's create (409).
	var wg sync.WaitGroup
	for c := range customers {
		wg.Go(func() {
			for i := c; i < orders; i += customers {
				for {
					err := s.place(ctx, i)
					var be *coord.BatchError
					if err == nil || (errors.As(err, &be) && be.Index == 0 && be.StatusCode == http.StatusConflict) {
						break
					}
					if ctx.Err() != nil {
						t.Errorf("placing order %d: %v", i, err)
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()

	read := func() map[string][]int {
		out := map[string][]int{}
		for c := range customers {
			for {
				r, err := s.ledger.ReadItem(ctx, azcosmos.NewPartitionKeyString(customerOf(c)), "balance", nil)
				if err == nil {
					var d struct{ Seqs []int }
					_ = json.Unmarshal(r.Value, &d)
					out[customerOf(c)] = d.Seqs
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("reading the ledger: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		return out
	}
	var got map[string][]int
	for {
		got = read()
		n := 0
		for _, seqs := range got {
			n += len(seqs)
		}
		if n >= orders {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d messages applied: %v", n, orders, got)
		case <-time.After(100 * time.Millisecond):
		}
	}
	s.server.LogHits(t)
	for c := range customers {
		var want []int
		for i := c; i < orders; i += customers {
			want = append(want, i)
		}
		if seqs := got[customerOf(c)]; !slices.Equal(seqs, want) {
			t.Errorf("customer %s: applied %v, want each once in order %v", customerOf(c), seqs, want)
		}
	}
	t.Logf("%d messages, %d customers", orders, customers)
}
