package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// readDoc reads an item into a map.
func readDoc(t *testing.T, c *azcosmos.ContainerClient, pk azcosmos.PartitionKey, id string) (map[string]any, azcore.ETag) {
	t.Helper()
	r, err := c.ReadItem(context.Background(), pk, id, nil)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	var d map[string]any
	if err := json.Unmarshal(r.Value, &d); err != nil {
		t.Fatal(err)
	}
	return d, r.ETag
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
	return d
}

var withContent = &azcosmos.ItemOptions{EnableContentResponseOnWrite: true}

// TestSeed001Patch is seed 001's patch.py: set, incr, add and remove in one
// patch, then a conditional sell that must fail and one that must not.
func TestSeed001Patch(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	products := newContainer(t, s, "shop", "products", "/category")
	games := azcosmos.NewPartitionKeyString("games")
	if _, err := products.UpsertItem(ctx, games, mustJSON(t, map[string]any{"id": "p1", "category": "games",
		"name": "Chess", "price": 25.5, "stock": 10, "tags": []string{"board"}, "promo": "summer"}), nil); err != nil {
		t.Fatal(err)
	}
	var ops azcosmos.PatchOperations
	ops.AppendSet("/price", 22.5)
	ops.AppendIncrement("/stock", -3)
	ops.AppendAdd("/tags/-", "classic")
	ops.AppendRemove("/promo")
	r, err := products.PatchItem(ctx, games, "p1", ops, withContent)
	if err != nil {
		t.Fatalf("patch: %v", err)
	}
	p := decode(t, r.Value)
	_, hasPromo := p["promo"]
	tags := []string{}
	for _, tag := range p["tags"].([]any) {
		tags = append(tags, tag.(string))
	}
	tr := &transcript{t: t}
	tr.printf("price %v | stock %v | tags %s | has promo: %s", p["price"], p["stock"], pyList(tags), pyBool(hasPromo))
	sell := func(qty int) (azcosmos.ItemResponse, error) {
		var ops azcosmos.PatchOperations
		ops.AppendIncrement("/stock", int64(-qty))
		ops.SetCondition(fmt.Sprintf("FROM c WHERE c.stock >= %d", qty))
		return products.PatchItem(ctx, games, "p1", ops, withContent)
	}
	for _, qty := range []int{10, 5} {
		r, err := sell(qty)
		if err != nil {
			tr.printf("sell %d: %s", qty, firstLine(t, err))
			continue
		}
		tr.printf("sell %d: stock now %v", qty, decode(t, r.Value)["stock"])
	}
	tr.expect(
		"price 22.5 | stock 7 | tags ['board', 'classic'] | has promo: False",
		"sell 10: 412 (PreconditionFailed) One of the specified pre-condition is not met",
		"sell 5: stock now 2")
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// TestSeed000PatchLesson is seed 000's patch steps: incr a total, add+set
// then remove, and a false condition that changes nothing. (Its ETag steps are
// TestSeed000ETagLesson.)
func TestSeed000PatchLesson(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "storedb", "orders", "/customer")
	alice, bob := azcosmos.NewPartitionKeyString("alice"), azcosmos.NewPartitionKeyString("bob")
	for _, o := range []map[string]any{{"id": "o0", "customer": "alice", "total": 30}, {"id": "o1", "customer": "bob", "total": 12}, {"id": "o2", "customer": "alice", "total": 55}} {
		if _, err := c.UpsertItem(ctx, azcosmos.NewPartitionKeyString(o["customer"].(string)), mustJSON(t, o), nil); err != nil {
			t.Fatal(err)
		}
	}
	tr := &transcript{t: t}
	before, _ := readDoc(t, c, bob, "o1")
	tr.printf("o1 total before patch: %v", before["total"])
	var incr azcosmos.PatchOperations
	incr.AppendIncrement("/total", 5)
	r, err := c.PatchItem(ctx, bob, "o1", incr, withContent)
	if err != nil {
		t.Fatal(err)
	}
	tr.printf("o1 total after incr patch: %v", decode(t, r.Value)["total"])

	var addSet azcosmos.PatchOperations
	addSet.AppendAdd("/status", "pending")
	addSet.AppendSet("/status", "shipped")
	if _, err := c.PatchItem(ctx, alice, "o0", addSet, nil); err != nil {
		t.Fatal(err)
	}
	shipped, _ := readDoc(t, c, alice, "o0")
	tr.printf("status after add+set: %v", shipped["status"])
	var remove azcosmos.PatchOperations
	remove.AppendRemove("/status")
	if _, err := c.PatchItem(ctx, alice, "o0", remove, nil); err != nil {
		t.Fatal(err)
	}
	after, _ := readDoc(t, c, alice, "o0")
	_, has := after["status"]
	tr.printf("has status after remove: %s", pyBool(has))

	o2, _ := readDoc(t, c, alice, "o2")
	tr.printf("o2 total before: %v", o2["total"])
	var cond azcosmos.PatchOperations
	cond.AppendIncrement("/total", 1000)
	cond.SetCondition("FROM c WHERE c.total > 10000")
	_, err = c.PatchItem(ctx, alice, "o2", cond, nil)
	tr.printf("conditional patch with false predicate -> %v", statusOf(t, err))
	o2, _ = readDoc(t, c, alice, "o2")
	tr.printf("o2 total after (unchanged): %v", o2["total"])

	tr.expect(
		"o1 total before patch: 12",
		"o1 total after incr patch: 17",
		"status after add+set: shipped",
		"has status after remove: False",
		"o2 total before: 55",
		"conditional patch with false predicate -> 412",
		"o2 total after (unchanged): 55")
}

// TestSeed001Counter is seed 001's counter.py: 20 writers make 200 updates
// to each of three counters. Read-and-replace without an ETag loses updates;
// with the ETag and a retry on 412, and with patch incr, the count is 200.
func TestSeed001Counter(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	views := newContainer(t, s, "shop", "counters", "/id")
	incr := func(n string) error {
		var ops azcosmos.PatchOperations
		ops.AppendIncrement("/views", 1)
		_, err := views.PatchItem(ctx, azcosmos.NewPartitionKeyString(n), n, ops, nil)
		return err
	}
	noETag := func(n string) error {
		pk := azcosmos.NewPartitionKeyString(n)
		r, err := views.ReadItem(ctx, pk, n, nil)
		if err != nil {
			return err
		}
		var d map[string]any
		json.Unmarshal(r.Value, &d)
		d["views"] = d["views"].(float64) + 1
		b, _ := json.Marshal(d)
		_, err = views.ReplaceItem(ctx, pk, n, b, nil)
		return err
	}
	etagRetry := func(n string) error {
		pk := azcosmos.NewPartitionKeyString(n)
		for {
			r, err := views.ReadItem(ctx, pk, n, nil)
			if err != nil {
				return err
			}
			var d map[string]any
			json.Unmarshal(r.Value, &d)
			d["views"] = d["views"].(float64) + 1
			b, _ := json.Marshal(d)
			_, err = views.ReplaceItem(ctx, pk, n, b, &azcosmos.ItemOptions{IfMatchEtag: &r.ETag})
			if err == nil || statusOf(t, err) != http.StatusPreconditionFailed {
				return err
			}
		}
	}
	tr := &transcript{t: t}
	for _, fn := range []struct {
		name string
		f    func(string) error
	}{{"no_etag", noETag}, {"etag_retry", etagRetry}, {"patch_incr", incr}} {
		pk := azcosmos.NewPartitionKeyString(fn.name)
		if _, err := views.UpsertItem(ctx, pk, mustJSON(t, map[string]any{"id": fn.name, "views": 0}), nil); err != nil {
			t.Fatal(err)
		}
		runWriters(t, 20, 200, func(int) error { return fn.f(fn.name) })
		d, _ := readDoc(t, views, pk, fn.name)
		v := d["views"].(float64)
		shown := fmt.Sprint(v)
		if v != 200 {
			shown = "lost updates: under 200"
		}
		t.Logf("%s ended at %v", fn.name, v)
		tr.printf("%-11s %s", fn.name, shown)
	}
	tr.expect(
		"no_etag     lost updates: under 200",
		"etag_retry  200",
		"patch_incr  200")
}

// runWriters runs n calls of fn on w goroutines and fails the test on the
// first error.
func runWriters(t *testing.T, w, n int, fn func(i int) error) {
	t.Helper()
	work := make(chan int, n)
	for i := range n {
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	errs := make(chan error, w)
	for range w {
		wg.Go(func() {
			for i := range work {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("writer: %v", err)
	}
}

// TestSeed003FirstCreateRace is seed 003's race without a stored procedure:
// 20 writers each append a value to an array on an item that does not exist
// yet. Each tries to create it; on 409 it patches add /value/-. No value is
// lost.
func TestSeed003FirstCreateRace(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "lists", "/pk")
	pk := azcosmos.NewPartitionKeyString("k")
	runWriters(t, 20, 20, func(i int) error {
		v := fmt.Sprintf("v%02d", i)
		_, err := c.CreateItem(ctx, pk, mustJSON(t, map[string]any{"id": "list", "pk": "k", "value": []string{v}}), nil)
		if statusOf(t, err) != http.StatusConflict {
			return err
		}
		var ops azcosmos.PatchOperations
		ops.AppendAdd("/value/-", v)
		_, err = c.PatchItem(ctx, pk, "list", ops, nil)
		return err
	})
	d, _ := readDoc(t, c, pk, "list")
	var got []string
	for _, v := range d["value"].([]any) {
		got = append(got, v.(string))
	}
	slices.Sort(got)
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprintf("v%02d", i))
	}
	t.Logf("values: %v", got)
	if !slices.Equal(got, want) {
		t.Errorf("values = %v, want all 20: %v", got, want)
	}
}

// TestGoSDKPatchErrors checks the patch failures the SDK sees, and that a
// failed patch changes nothing.
func TestGoSDKPatchErrors(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "items", "/pk")
	pk := azcosmos.NewPartitionKeyString("a")
	cr, err := c.CreateItem(ctx, pk, mustJSON(t, map[string]any{"id": "1", "pk": "a", "n": 1, "s": "x", "list": []int{1, 2}}), nil)
	if err != nil {
		t.Fatal(err)
	}
	etag := cr.ETag
	ops := func(f func(p *azcosmos.PatchOperations)) azcosmos.PatchOperations {
		var p azcosmos.PatchOperations
		f(&p)
		return p
	}
	eleven := ops(func(p *azcosmos.PatchOperations) {
		for range 11 {
			p.AppendIncrement("/n", 1)
		}
	})
	tests := []struct {
		name   string
		id     string
		ops    azcosmos.PatchOperations
		opts   *azcosmos.ItemOptions
		status int
		line   string
	}{
		{"eleven operations", "1", eleven, nil, 400, "400 (BadRequest) The number of patch operations can't exceed 10: this request has 11"},
		{"replace a missing path", "1", ops(func(p *azcosmos.PatchOperations) { p.AppendIncrement("/n", 1); p.AppendReplace("/nope", 1) }), nil, 400,
			"400 (BadRequest) For Operation(2): Node(/nope) to be replaced is absent"},
		{"remove a missing path", "1", ops(func(p *azcosmos.PatchOperations) { p.AppendRemove("/list/2") }), nil, 400,
			"400 (BadRequest) For Operation(1): Node(/list/2) to be removed is absent"},
		{"incr a string", "1", ops(func(p *azcosmos.PatchOperations) { p.AppendIncrement("/s", 1) }), nil, 400,
			"400 (BadRequest) For Operation(1): Node(/s) is a string: incr can only add to a number"},
		{"into a non-container", "1", ops(func(p *azcosmos.PatchOperations) { p.AppendSet("/n/x", 1) }), nil, 400,
			"400 (BadRequest) For Operation(1): Node(/n) is a number, not an object or array, so path /n/x cannot go into it"},
		{"the id", "1", ops(func(p *azcosmos.PatchOperations) { p.AppendSet("/id", "2") }), nil, 400,
			"400 (BadRequest) For Operation(1): the id cannot be patched (path /id): create a new item and delete the old one"},
		{"the partition key", "1", ops(func(p *azcosmos.PatchOperations) { p.AppendSet("/pk", "b") }), nil, 400,
			"400 (BadRequest) For Operation(1): the path /pk would change the partition key /pk, and an item's partition key cannot change: create a new item and delete the old one"},
		{"a missing item", "2", ops(func(p *azcosmos.PatchOperations) { p.AppendSet("/n", 1) }), nil, 404,
			"404 (NotFound) Entity with the specified id does not exist in the system"},
		{"a stale If-Match", "1", ops(func(p *azcosmos.PatchOperations) { p.AppendSet("/n", 1) }), &azcosmos.ItemOptions{IfMatchEtag: ptr(azcore.ETag(`"stale"`))}, 412,
			"412 (PreconditionFailed) E-tag mismatch detected"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.PatchItem(ctx, pk, tc.id, tc.ops, tc.opts)
			if got := statusOf(t, err); got != tc.status {
				t.Fatalf("status %d, want %d (%v)", got, tc.status, err)
			}
			if got := firstLine(t, err); got != tc.line {
				t.Errorf("error %q, want %q", got, tc.line)
			}
			if _, now := readDoc(t, c, pk, "1"); now != etag {
				t.Errorf("a failed patch changed the item: etag %s, was %s", now, etag)
			}
		})
	}
	r, err := c.PatchItem(ctx, pk, "1", ops(func(p *azcosmos.PatchOperations) { p.AppendSet("/n", 5) }), &azcosmos.ItemOptions{IfMatchEtag: &etag})
	if err != nil {
		t.Fatalf("patch with the current etag: %v", err)
	}
	if r.ETag == etag || len(r.Value) != 0 {
		t.Errorf("patch under the Go SDK's default Prefer: return=minimal: etag %s (was %s), body %q", r.ETag, etag, r.Value)
	}
}

func ptr[T any](v T) *T { return &v }
