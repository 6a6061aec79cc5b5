package lock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord"
	"github.com/orrery-db/orrery/coord/lock"
)

// item is a protected item as the tests write it.
type item struct {
	ID     string           `json:"id"`
	PK     string           `json:"pk"`
	Value  string           `json:"value"`
	Fences map[string]int64 `json:"fences,omitempty"`
}

func body(id, value string) []byte {
	b, _ := json.Marshal(item{ID: id, PK: "p", Value: value})
	return b
}

func readItem(t *testing.T, c *azcosmos.ContainerClient, id string) (item, bool) {
	t.Helper()
	r, err := c.ReadItem(context.Background(), azcosmos.NewPartitionKeyString("p"), id, nil)
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
		return item{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var it item
	if err := json.Unmarshal(r.Value, &it); err != nil {
		t.Fatal(err)
	}
	return it, true
}

func statusOf(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

// Every fenced write refuses a token older than the newest its item has
// accepted for the lock's name, and passes the same token again.
func TestFencedWritesRefuseOlderTokens(t *testing.T) {
	c := client(t, nil)
	data := dataContainer(t, c, newDB(t, c))
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	old, cur := lock.Fence{Name: "seats", Token: 4}, lock.Fence{Name: "seats", Token: 5}

	if _, err := lock.FencedCreate(ctx, data, pk, body("a", "created"), cur); err != nil {
		t.Fatal(err)
	}
	if it, _ := readItem(t, data, "a"); it.Fences["seats"] != 5 || it.Value != "created" {
		t.Fatalf("after FencedCreate: %+v", it)
	}
	if _, err := lock.FencedReplace(ctx, data, pk, "a", body("a", "replaced"), cur); err != nil {
		t.Fatal(err)
	}
	var ops azcosmos.PatchOperations
	ops.AppendSet("/value", "patched")
	if _, err := lock.FencedPatch(ctx, data, pk, "a", lock.Fence{Name: "seats", Token: 6}, ops); err != nil {
		t.Fatal(err)
	}
	// Token 6 was accepted: 5 and 4 are now refused by every kind of write.
	for name, write := range map[string]func() error{
		"create": func() error { _, err := lock.FencedCreate(ctx, data, pk, body("a", "late"), cur); return err },
		"replace": func() error {
			_, err := lock.FencedReplace(ctx, data, pk, "a", body("a", "late"), cur)
			return err
		},
		"upsert": func() error { _, err := lock.FencedUpsert(ctx, data, pk, body("a", "late"), old); return err },
		"patch": func() error {
			var late azcosmos.PatchOperations
			late.AppendSet("/value", "late")
			_, err := lock.FencedPatch(ctx, data, pk, "a", cur, late)
			return err
		},
		"delete": func() error { _, err := lock.FencedDelete(ctx, data, pk, "a", old); return err },
		"batch": func() error {
			b := lock.NewFencedBatch(data, pk, cur)
			b.CreateItem(body("b", "late"))
			b.ReplaceItem("a", body("a", "late"))
			_, err := b.Execute(ctx, nil)
			return err
		},
	} {
		if err := write(); !errors.Is(err, lock.ErrFenced) {
			t.Errorf("%s with an older token: %v, want ErrFenced", name, err)
		}
	}
	if it, _ := readItem(t, data, "a"); it.Value != "patched" || it.Fences["seats"] != 6 {
		t.Fatalf("the item after the refused writes: %+v", it)
	}
	if _, ok := readItem(t, data, "b"); ok {
		t.Fatal("the refused batch created b")
	}
	// Upsert of an absent item creates it; a delete with the newest token
	// deletes.
	if _, err := lock.FencedUpsert(ctx, data, pk, body("c", "upserted"), cur); err != nil {
		t.Fatal(err)
	}
	if it, ok := readItem(t, data, "c"); !ok || it.Fences["seats"] != 5 {
		t.Fatalf("upserted item: %+v", it)
	}
	if _, err := lock.FencedDelete(ctx, data, pk, "a", lock.Fence{Name: "seats", Token: 6}); err != nil {
		t.Fatal(err)
	}
	if _, ok := readItem(t, data, "a"); ok {
		t.Fatal("FencedDelete left the item")
	}
	// An ordinary failure is the service's: a create of an existing item
	// with no newer token is a 409, a replace of a missing one a 404.
	if _, err := lock.FencedCreate(ctx, data, pk, body("c", "again"), cur); statusOf(err) != http.StatusConflict {
		t.Fatalf("FencedCreate of an existing item: %v, want 409", err)
	}
	if _, err := lock.FencedReplace(ctx, data, pk, "missing", body("missing", "x"), cur); statusOf(err) != http.StatusNotFound {
		t.Fatalf("FencedReplace of a missing item: %v, want 404", err)
	}
}

// One item guarded by two locks keeps a token per lock name: a write under
// one lock neither checks nor erases the other's.
func TestFencesPerLockNameOnOneItem(t *testing.T) {
	c := client(t, nil)
	data := dataContainer(t, c, newDB(t, c))
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	// An ordinary item, written without any fence: the first fenced patch
	// gives it its map.
	if _, err := data.CreateItem(ctx, pk, body("seat", "free"), nil); err != nil {
		t.Fatal(err)
	}
	var ops azcosmos.PatchOperations
	ops.AppendSet("/value", "held by the map lock")
	if _, err := lock.FencedPatch(ctx, data, pk, "seat", lock.Fence{Name: "seat-map", Token: 9}, ops); err != nil {
		t.Fatal(err)
	}
	// A name with a character a JSON pointer escapes.
	odd := lock.Fence{Name: "concert~42 late", Token: 2}
	if _, err := lock.FencedReplace(ctx, data, pk, "seat", body("seat", "sold"), odd); err != nil {
		t.Fatal(err)
	}
	it, _ := readItem(t, data, "seat")
	if it.Fences["seat-map"] != 9 || it.Fences[odd.Name] != 2 || it.Value != "sold" {
		t.Fatalf("after writes under two locks: %+v", it)
	}
	// Token 3 of the other lock is fine although 9 of the first is there.
	var more azcosmos.PatchOperations
	more.AppendSet("/value", "resold")
	if _, err := lock.FencedPatch(ctx, data, pk, "seat", lock.Fence{Name: odd.Name, Token: 3}, more); err != nil {
		t.Fatal(err)
	}
	if _, err := lock.FencedPatch(ctx, data, pk, "seat", odd, more); !errors.Is(err, lock.ErrFenced) {
		t.Fatalf("token 2 after 3 under the same name: %v, want ErrFenced", err)
	}
	it, _ = readItem(t, data, "seat")
	if it.Fences["seat-map"] != 9 || it.Fences[odd.Name] != 3 {
		t.Fatalf("fences %+v", it.Fences)
	}
}

// A fenced batch commits whole or not at all: one item carrying a newer
// token refuses it, and an ordinary failure is a *coord.BatchError naming
// the operation, with nothing written either way.
func TestFencedBatchIsAllOrNothing(t *testing.T) {
	c := client(t, nil)
	data := dataContainer(t, c, newDB(t, c))
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	for _, id := range []string{"r", "u", "p", "d"} {
		if _, err := data.CreateItem(ctx, pk, body(id, "before"), nil); err != nil {
			t.Fatal(err)
		}
	}
	f := lock.Fence{Name: "section", Token: 3}
	var ops azcosmos.PatchOperations
	ops.AppendSet("/value", "patched")
	b := lock.NewFencedBatch(data, pk, f)
	b.CreateItem(body("new", "created"))
	b.ReplaceItem("r", body("r", "replaced"))
	b.UpsertItem(body("u", "upserted"))
	b.UpsertItem(body("fresh", "upserted"))
	b.PatchItem("p", ops)
	b.DeleteItem("d")
	b.ReadItem("r")
	resp, err := b.Execute(ctx, nil)
	if err != nil || !resp.Success || len(resp.OperationResults) != 7 {
		t.Fatalf("fenced batch: %v (%+v)", err, resp)
	}
	for id, want := range map[string]string{"new": "created", "r": "replaced", "u": "upserted", "fresh": "upserted", "p": "patched"} {
		if it, ok := readItem(t, data, id); !ok || it.Value != want || it.Fences["section"] != 3 {
			t.Fatalf("%s after the batch: %+v (present %v)", id, it, ok)
		}
	}
	if _, ok := readItem(t, data, "d"); ok {
		t.Fatal("the batch did not delete d")
	}

	// A newer holder writes one item; an older holder's batch touching it
	// and others writes nothing.
	if _, err := lock.FencedPatch(ctx, data, pk, "p", lock.Fence{Name: "section", Token: 4}, ops); err != nil {
		t.Fatal(err)
	}
	late := lock.NewFencedBatch(data, pk, f)
	late.ReplaceItem("r", body("r", "late"))
	late.PatchItem("p", ops)
	late.CreateItem(body("late", "late"))
	if _, err := late.Execute(ctx, nil); !errors.Is(err, lock.ErrFenced) {
		t.Fatalf("an older holder's batch: %v, want ErrFenced", err)
	}
	if it, _ := readItem(t, data, "r"); it.Value != "replaced" {
		t.Fatalf("r after the refused batch: %+v", it)
	}
	if _, ok := readItem(t, data, "late"); ok {
		t.Fatal("the refused batch created an item")
	}

	// An ordinary failure: the create of an item that exists (with no newer
	// token) fails the batch at its position.
	dup := lock.NewFencedBatch(data, pk, lock.Fence{Name: "section", Token: 4})
	dup.ReplaceItem("r", body("r", "never"))
	dup.CreateItem(body("new", "again"))
	_, err = dup.Execute(ctx, nil)
	var be *coord.BatchError
	if !errors.As(err, &be) || be.Index != 1 || be.StatusCode != http.StatusConflict {
		t.Fatalf("batch creating an existing item: %v, want a BatchError for operation 1 (409)", err)
	}
	if it, _ := readItem(t, data, "r"); it.Value != "replaced" {
		t.Fatalf("r after the failed batch: %+v", it)
	}
}

// Writers holding tokens 1..8 race with fenced writes of every kind on the
// same items while a reader watches: the token an item carries never goes
// back (a write that read an item before a newer token landed must not
// apply after it), and every refused write is ErrFenced, nothing else.
func TestFencedWritesRaceWithoutGoingBack(t *testing.T) {
	// Writes are held back a little on their way, so that a newer token
	// often lands between a fenced write's read and its write.
	c := client(t, &azcosmos.ClientOptions{ClientOptions: policy.ClientOptions{PerRetryPolicies: []policy.Policy{jitter{}}}})
	data := dataContainer(t, c, newDB(t, c))
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	for _, id := range []string{"x", "y"} {
		if _, err := data.CreateItem(ctx, pk, body(id, "0"), nil); err != nil {
			t.Fatal(err)
		}
	}
	var stop atomic.Bool
	var backwards atomic.Value
	var readers sync.WaitGroup
	for _, id := range []string{"x", "y"} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			var last int64
			for !stop.Load() {
				r, err := data.ReadItem(ctx, pk, id, nil)
				if err != nil {
					continue
				}
				var it item
				_ = json.Unmarshal(r.Value, &it)
				if tok := it.Fences["race"]; tok < last {
					backwards.Store(fmt.Sprintf("%s went from token %d back to %d", id, last, tok))
				} else {
					last = tok
				}
			}
		}()
	}
	var writers sync.WaitGroup
	var accepted, fenced atomic.Int64
	errs := make(chan error, 100)
	for w := 1; w <= 8; w++ {
		writers.Add(1)
		go func() {
			defer writers.Done()
			// Newer holders arrive later, as successors do.
			time.Sleep(time.Duration(w) * 5 * time.Millisecond)
			f := lock.Fence{Name: "race", Token: int64(w)}
			for i := range 15 {
				id := []string{"x", "y"}[rand.IntN(2)]
				v := fmt.Sprintf("%d.%d", w, i)
				var err error
				switch rand.IntN(4) {
				case 0:
					_, err = lock.FencedReplace(ctx, data, pk, id, body(id, v), f)
				case 1:
					var ops azcosmos.PatchOperations
					ops.AppendSet("/value", v)
					_, err = lock.FencedPatch(ctx, data, pk, id, f, ops)
				case 2:
					_, err = lock.FencedUpsert(ctx, data, pk, body(id, v), f)
				case 3:
					b := lock.NewFencedBatch(data, pk, f)
					b.ReplaceItem("x", body("x", v))
					var ops azcosmos.PatchOperations
					ops.AppendSet("/value", v)
					b.PatchItem("y", ops)
					_, err = b.Execute(ctx, nil)
				}
				switch {
				case err == nil:
					accepted.Add(1)
				case errors.Is(err, lock.ErrFenced):
					fenced.Add(1)
				default:
					errs <- err
					return
				}
				time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
			}
		}()
	}
	writers.Wait()
	stop.Store(true)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if b := backwards.Load(); b != nil {
		t.Fatal(b)
	}
	t.Logf("%d writes accepted, %d fenced out", accepted.Load(), fenced.Load())
	if accepted.Load() == 0 || fenced.Load() == 0 {
		t.Fatalf("the race did not race: %d accepted, %d fenced", accepted.Load(), fenced.Load())
	}
	for _, id := range []string{"x", "y"} {
		if it, _ := readItem(t, data, id); it.Fences["race"] != 8 {
			t.Fatalf("%s ends with token %d, want the newest, 8", id, it.Fences["race"])
		}
	}
}

// jitter delays every write request by up to 3 ms.
type jitter struct{}

func (jitter) Do(req *policy.Request) (*http.Response, error) {
	if req.Raw().Method != http.MethodGet {
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
	}
	return req.Next()
}
