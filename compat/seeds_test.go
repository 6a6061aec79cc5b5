package compat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// firstLine renders an SDK error the way the seeds' common.py does:
// status, (code) and the first line of the message.
func firstLine(t *testing.T, err error) string {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("not a response error: %v", err)
	}
	var body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	raw, _ := io.ReadAll(re.RawResponse.Body)
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("error body is not Cosmos JSON: %q", raw)
	}
	msg, _, _ := strings.Cut(body.Message, "\r\n")
	msg, _, _ = strings.Cut(msg, "\n")
	return fmt.Sprintf("%d (%s) %s", re.StatusCode, body.Code, strings.TrimSuffix(msg, "."))
}

// transcript collects the lines a seed script prints.
type transcript struct {
	t     *testing.T
	lines []string
}

func (tr *transcript) printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	tr.t.Log(line)
	tr.lines = append(tr.lines, line)
}

func (tr *transcript) expect(want ...string) {
	tr.t.Helper()
	if strings.Join(tr.lines, "\n") != strings.Join(want, "\n") {
		tr.t.Errorf("printed:\n%s\nwant:\n%s", strings.Join(tr.lines, "\n"), strings.Join(want, "\n"))
	}
}

type customer struct {
	ID         string `json:"id"`
	CustomerID string `json:"customerId"`
	Phone      string `json:"phone"`
	Email      string `json:"email"`
	ETag       string `json:"_etag,omitempty"`
}

func readCustomer(t *testing.T, c *azcosmos.ContainerClient, id string) customer {
	t.Helper()
	r, err := c.ReadItem(context.Background(), azcosmos.NewPartitionKeyString(id), id, nil)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	var cu customer
	if err := json.Unmarshal(r.Value, &cu); err != nil {
		t.Fatal(err)
	}
	return cu
}

// Seed 001, question 1: lost.py and etag.py.
func TestSeed001LostUpdateAndETag(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	customers := newContainer(t, s, "shop", "customers", "/customerId")
	pk := azcosmos.NewPartitionKeyString("c1")
	reset := func() {
		if _, err := customers.UpsertItem(ctx, pk, mustJSON(t, customer{ID: "c1", CustomerID: "c1", Phone: "555-0100", Email: "ann@old.test"}), nil); err != nil {
			t.Fatal(err)
		}
	}

	// lost.py: no ETags, Ben's older copy puts the old phone back.
	reset()
	tr := &transcript{t: t}
	anna, ben := readCustomer(t, customers, "c1"), readCustomer(t, customers, "c1")
	anna.Phone = "555-0199"
	if _, err := customers.ReplaceItem(ctx, pk, "c1", mustJSON(t, anna), nil); err != nil {
		t.Fatal(err)
	}
	ben.Email = "ann@new.test"
	if _, err := customers.ReplaceItem(ctx, pk, "c1", mustJSON(t, ben), nil); err != nil {
		t.Fatal(err)
	}
	d := readCustomer(t, customers, "c1")
	tr.printf("no etag:   phone %s | email %s", d.Phone, d.Email)
	tr.expect("no etag:   phone 555-0100 | email ann@new.test")

	// etag.py: the stale replace fails with 412; re-read and retry keeps both changes.
	reset()
	tr = &transcript{t: t}
	anna, ben = readCustomer(t, customers, "c1"), readCustomer(t, customers, "c1")
	anna.Phone = "555-0199"
	etag := azcore.ETag(anna.ETag)
	if _, err := customers.ReplaceItem(ctx, pk, "c1", mustJSON(t, anna), &azcosmos.ItemOptions{IfMatchEtag: &etag}); err != nil {
		t.Fatal(err)
	}
	tr.printf("Anna: saved")
	ben.Email = "ann@new.test"
	etag = azcore.ETag(ben.ETag)
	_, err := customers.ReplaceItem(ctx, pk, "c1", mustJSON(t, ben), &azcosmos.ItemOptions{IfMatchEtag: &etag})
	if err == nil {
		t.Fatal("Ben's stale replace succeeded")
	}
	tr.printf("Ben:  %s", firstLine(t, err))
	ben = readCustomer(t, customers, "c1")
	ben.Email = "ann@new.test"
	etag = azcore.ETag(ben.ETag)
	if _, err := customers.ReplaceItem(ctx, pk, "c1", mustJSON(t, ben), &azcosmos.ItemOptions{IfMatchEtag: &etag}); err != nil {
		t.Fatal(err)
	}
	tr.printf("Ben:  re-read and saved")
	d = readCustomer(t, customers, "c1")
	tr.printf("with etag: phone %s | email %s", d.Phone, d.Email)
	tr.expect(
		"Anna: saved",
		"Ben:  412 (PreconditionFailed) E-tag mismatch detected",
		"Ben:  re-read and saved",
		"with etag: phone 555-0199 | email ann@new.test",
	)
}

type order struct {
	ID       string  `json:"id"`
	Customer string  `json:"customer"`
	Total    float64 `json:"total"`
	ETag     string  `json:"_etag,omitempty"`
}

// Seed 000: a stale ETag makes replace fail loudly; the fix is to re-read the
// current ETag; a replace without an ETag overwrites unconditionally.
func TestSeed000ETagLesson(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	orders := newContainer(t, s, "storedb", "orders", "/customer")
	bob := azcosmos.NewPartitionKeyString("bob")
	for _, o := range []order{{"o0", "alice", 30, ""}, {"o1", "bob", 12, ""}, {"o2", "alice", 55, ""}} {
		if _, err := orders.UpsertItem(ctx, azcosmos.NewPartitionKeyString(o.Customer), mustJSON(t, o), nil); err != nil {
			t.Fatal(err)
		}
	}
	read := func() order {
		r, err := orders.ReadItem(ctx, bob, "o1", nil)
		if err != nil {
			t.Fatal(err)
		}
		var o order
		if err := json.Unmarshal(r.Value, &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	replace := func(o order, etag string) (order, error) {
		opts := &azcosmos.ItemOptions{EnableContentResponseOnWrite: true}
		if etag != "" {
			e := azcore.ETag(etag)
			opts.IfMatchEtag = &e
		}
		r, err := orders.ReplaceItem(ctx, bob, "o1", mustJSON(t, o), opts)
		if err != nil {
			return order{}, err
		}
		var out order
		if err := json.Unmarshal(r.Value, &out); err != nil {
			t.Fatal(err)
		}
		return out, nil
	}
	tr := &transcript{t: t}
	stale := read()
	if _, err := orders.UpsertItem(ctx, bob, mustJSON(t, order{"o1", "bob", 999, ""}), nil); err != nil {
		t.Fatal(err)
	}
	_, err := replace(order{"o1", "bob", 1000, ""}, stale.ETag)
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("stale replace: %v", err)
	}
	tr.printf("replace with stale etag -> %d", re.StatusCode)
	fresh := read()
	retried, err := replace(order{"o1", "bob", 1000, ""}, fresh.ETag)
	if err != nil {
		t.Fatal(err)
	}
	tr.printf("retry with current etag -> total: %v", retried.Total)
	if _, err := orders.UpsertItem(ctx, bob, mustJSON(t, order{"o1", "bob", 2000, ""}), nil); err != nil {
		t.Fatal(err)
	}
	unconditional, err := replace(order{"o1", "bob", 3000, ""}, "")
	if err != nil {
		t.Fatal(err)
	}
	tr.printf("unconditional replace -> total: %v", unconditional.Total)
	tr.expect(
		"replace with stale etag -> 412",
		"retry with current etag -> total: 1000",
		"unconditional replace -> total: 3000",
	)
}
