package compat

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// uniqueContainer creates container db/coll partitioned on /pk with the
// unique keys given (each a list of paths).
func uniqueContainer(t *testing.T, s *orrerytest.Server, coll string, keys ...[]string) *azcosmos.ContainerClient {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil && statusOf(t, err) != http.StatusConflict {
		t.Fatal(err)
	}
	db, _ := s.Client.NewDatabase("db")
	policy := &azcosmos.UniqueKeyPolicy{}
	for _, k := range keys {
		policy.UniqueKeys = append(policy.UniqueKeys, azcosmos.UniqueKey{Paths: k})
	}
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: coll,
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}, UniqueKeyPolicy: policy}, nil); err != nil {
		t.Fatal(err)
	}
	c, _ := db.NewContainer(coll)
	return c
}

// TestGoSDKUniqueKeys: a unique key policy is enforced per logical
// partition, on create, upsert, replace and batch, with composite paths and
// missing values counting as null; deleting or changing an item frees its
// values; the policy cannot change.
func TestGoSDKUniqueKeys(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := uniqueContainer(t, s, "users", []string{"/email"}, []string{"/name/first", "/name/last"})
	pkA, pkB := azcosmos.NewPartitionKeyString("A"), azcosmos.NewPartitionKeyString("B")
	create := func(pk azcosmos.PartitionKey, body string) error {
		_, err := c.CreateItem(ctx, pk, []byte(body), nil)
		return err
	}
	conflict := func(what string, err error) {
		t.Helper()
		wantRefused(t, what, err, http.StatusConflict, "Unique index constraint violation.")
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("first", create(pkA, `{"id":"1","pk":"A","email":"a@x","name":{"first":"Ann","last":"Lee"}}`))
	conflict("same email", create(pkA, `{"id":"2","pk":"A","email":"a@x","name":{"first":"Bob","last":"Lee"}}`))
	conflict("same name", create(pkA, `{"id":"2","pk":"A","email":"b@x","name":{"first":"Ann","last":"Lee"}}`))
	must("another partition", create(pkB, `{"id":"2","pk":"B","email":"a@x","name":{"first":"Ann","last":"Lee"}}`))
	must("half the composite", create(pkA, `{"id":"3","pk":"A","email":"c@x","name":{"first":"Ann","last":"Kim"}}`))
	must("case differs", create(pkA, `{"id":"4","pk":"A","email":"A@x","name":{"first":"ann","last":"Lee"}}`))
	// Missing values are nulls: one item may lack email, not two; an
	// explicit null is the same value.
	must("no email", create(pkA, `{"id":"5","pk":"A","name":{"first":"N","last":"1"}}`))
	conflict("no email again", create(pkA, `{"id":"6","pk":"A","name":{"first":"N","last":"2"}}`))
	conflict("null email", create(pkA, `{"id":"6","pk":"A","email":null,"name":{"first":"N","last":"3"}}`))
	// Numbers compare as numbers.
	must("number", create(pkA, `{"id":"7","pk":"A","email":1,"name":{"first":"N","last":"4"}}`))
	conflict("same number", create(pkA, `{"id":"8","pk":"A","email":1.0,"name":{"first":"N","last":"5"}}`))

	// Replace and upsert: keeping one's own values is fine, taking
	// another's is not.
	_, err := c.ReplaceItem(ctx, pkA, "1", []byte(`{"id":"1","pk":"A","email":"a@x","name":{"first":"Ann","last":"Lee"},"v":2}`), nil)
	must("replace keeping values", err)
	_, err = c.ReplaceItem(ctx, pkA, "3", []byte(`{"id":"3","pk":"A","email":"a@x","name":{"first":"Ann","last":"Kim"}}`), nil)
	conflict("replace taking an email", err)
	_, err = c.UpsertItem(ctx, pkA, []byte(`{"id":"9","pk":"A","email":"a@x"}`), nil)
	conflict("upsert taking an email", err)
	// Moving an item's email frees the old one.
	_, err = c.ReplaceItem(ctx, pkA, "1", []byte(`{"id":"1","pk":"A","email":"moved@x","name":{"first":"Ann","last":"Lee"}}`), nil)
	must("replace moving the email", err)
	must("freed email", create(pkA, `{"id":"10","pk":"A","email":"a@x","name":{"first":"X","last":"Y"}}`))
	_, err = c.DeleteItem(ctx, pkA, "10", nil)
	must("delete", err)
	must("freed by delete", create(pkA, `{"id":"11","pk":"A","email":"a@x","name":{"first":"X","last":"Y"}}`))

	// A batch that breaks the policy, against the store or within itself,
	// is refused whole.
	b := c.NewTransactionalBatch(pkA)
	b.CreateItem([]byte(`{"id":"20","pk":"A","email":"new@x"}`), nil)
	b.CreateItem([]byte(`{"id":"21","pk":"A","email":"new@x","name":{"first":"Z","last":"Z"}}`), nil)
	br, err := c.ExecuteTransactionalBatch(ctx, b, nil)
	must("batch", err)
	if br.Success || br.OperationResults[1].StatusCode != http.StatusConflict {
		t.Errorf("a batch with a duplicate in itself: success %v, results %+v", br.Success, br.OperationResults)
	}
	if _, err := c.ReadItem(ctx, pkA, "20", nil); statusOf(t, err) != http.StatusNotFound {
		t.Errorf("the refused batch's first create stayed: %v", err)
	}
	must("new@x after the refused batch", create(pkA, `{"id":"22","pk":"A","email":"new@x","name":{"first":"Q","last":"Q"}}`))

	// The policy is fixed at creation.
	props, err := c.Read(ctx, nil)
	must("read container", err)
	p := *props.ContainerProperties
	if p.UniqueKeyPolicy == nil || len(p.UniqueKeyPolicy.UniqueKeys) != 2 {
		t.Fatalf("the container reads back without its policy: %+v", p.UniqueKeyPolicy)
	}
	p.UniqueKeyPolicy = &azcosmos.UniqueKeyPolicy{UniqueKeys: []azcosmos.UniqueKey{{Paths: []string{"/phone"}}}}
	_, err = c.Replace(ctx, p, nil)
	wantRefused(t, "changing the policy", err, http.StatusBadRequest, "unique key policy")
	p.UniqueKeyPolicy = props.ContainerProperties.UniqueKeyPolicy
	p.DefaultTimeToLive = nil
	_, err = c.Replace(ctx, p, nil)
	must("replace keeping the policy", err)
	conflict("still enforced after a replace", create(pkA, `{"id":"30","pk":"A","email":"new@x"}`))

	// Invalid policies are refused at creation.
	db, _ := s.Client.NewDatabase("db")
	for _, bad := range []string{"email", "/tags/[]", "/a/*", "/"} {
		_, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "bad", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}},
			UniqueKeyPolicy: &azcosmos.UniqueKeyPolicy{UniqueKeys: []azcosmos.UniqueKey{{Paths: []string{bad}}}}}, nil)
		wantRefused(t, "path "+bad, err, http.StatusBadRequest, "unique key path")
	}
}

// TestGoSDKUniqueKeysConcurrent: writers racing to take one email in one
// partition, through the SDK, each with its own id: exactly one wins and
// the rest get 409, in every round.
func TestGoSDKUniqueKeysConcurrent(t *testing.T) {
	s := orrerytest.Start(t)
	c := uniqueContainer(t, s, "race", []string{"/email"})
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("A")
	const rounds, writers = 20, 8
	for r := 0; r < rounds; r++ {
		var wg sync.WaitGroup
		statuses := make([]int, writers)
		start := make(chan struct{})
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				<-start
				body := fmt.Sprintf(`{"id":"r%d-w%d","pk":"A","email":"round%d@x"}`, r, w, r)
				var err error
				if w%2 == 0 {
					_, err = c.CreateItem(ctx, pk, []byte(body), nil)
				} else {
					_, err = c.UpsertItem(ctx, pk, []byte(body), nil)
				}
				if err == nil {
					statuses[w] = http.StatusCreated
				} else {
					statuses[w] = statusOf(t, err)
				}
			}(w)
		}
		close(start)
		wg.Wait()
		won := 0
		for _, st := range statuses {
			switch st {
			case http.StatusCreated:
				won++
			case http.StatusConflict:
			default:
				t.Fatalf("round %d: status %d", r, st)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d writers took the same email: %v", r, won, statuses)
		}
		rows := queryRows(t, c, fmt.Sprintf("SELECT VALUE c.id FROM c WHERE c.email = 'round%d@x'", r), pk)
		if len(rows) != 1 || !strings.HasPrefix(string(rows[0]), `"r`) {
			t.Fatalf("round %d: items with the email: %s", r, rawList(rows))
		}
	}
}
