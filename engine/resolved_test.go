package engine

import (
	"context"
	"testing"
)

// resolvedReq is req with the container as ref resolved it.
func resolvedReq(ref ContainerRef, id, pk, body string) *ItemRequest {
	r := req(id, pk, body)
	r.Resolved = ref
	return r
}

// resolvedQuery is a query of partition pk of db/c, with the container as
// ref resolved it.
func resolvedQuery(ref ContainerRef, pk string) *QueryRequest {
	return &QueryRequest{Database: "db", Container: "c", Query: "SELECT * FROM c", PartitionKey: StringKey(pk), HasPartitionKey: true, Resolved: ref}
}

// checkStaleRefIsLookedUpAgain: with ref resolved before c was deleted and
// made again with another partition key path on other (the same engine, or
// another gateway), e's operations answer as a lookup of their own would:
// the new container's items, written by its rules.
func checkStaleRefIsLookedUpAgain(t *testing.T, ctx context.Context, e, other *Engine, ref ContainerRef) {
	t.Helper()
	if err := other.DeleteContainer(ctx, "db", "c", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ReadItem(ctx, resolvedReq(ref, "1", "p", "")); statusOf(err) != 404 {
		t.Fatalf("read through a resolved container deleted since: %v, want 404", err)
	}
	if _, err := e.UpsertItem(ctx, resolvedReq(ref, "", "p", `{"id":"1","pk":"p"}`)); statusOf(err) != 404 {
		t.Fatalf("upsert through a resolved container deleted since: %v, want 404", err)
	}
	if _, err := e.ReplaceItem(ctx, resolvedReq(ref, "1", "p", `{"id":"1","pk":"p"}`)); statusOf(err) != 404 {
		t.Fatalf("replace through a resolved container deleted since: %v, want 404", err)
	}
	if _, err := e.QueryItems(ctx, resolvedQuery(ref, "p")); statusOf(err) != 404 {
		t.Fatalf("query through a resolved container deleted since: %v, want 404", err)
	}
	if _, err := other.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/k"]}}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := other.CreateItem(ctx, req("", "q", `{"id":"2","k":"q"}`)); err != nil {
		t.Fatal(err)
	}
	if res, err := e.ReadItem(ctx, resolvedReq(ref, "2", "q", "")); err != nil || res.Status != 200 {
		t.Fatalf("read through a resolved container made again since: %v, want the new container's item", err)
	}
	if _, err := e.UpsertItem(ctx, resolvedReq(ref, "", "q", `{"id":"3","k":"q"}`)); err != nil {
		t.Fatalf("upsert by the new container's partition key through a stale resolved container: %v", err)
	}
	if res, err := other.ReadItem(ctx, req("3", "q", "")); err != nil || res.Status != 200 {
		t.Fatalf("the upsert did not reach the new container: %v", err)
	}
	res, err := e.QueryItems(ctx, resolvedQuery(ref, "q"))
	if err != nil || len(res.Items) != 2 {
		t.Fatalf("query through a resolved container made again since: %v, want the new container's 2 items", err)
	}
	if res.Container == nil || res.Container == ref.Container() || res.Container.RID == ref.Container().RID {
		t.Errorf("the query's result names the container it read as the deleted one")
	}
}

// TestItemOperationsOnAResolvedContainerAnswerAsALookupWould: an operation
// passed the container its caller resolved (ItemRequest.Resolved) starts
// from it, and is answered as if it had looked the container up itself
// when it has been deleted (404) or made again since.
func TestItemOperationsOnAResolvedContainerAnswerAsALookupWould(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	ref, err := e.ResolveContainer(ctx, "db", "c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.UpsertItem(ctx, resolvedReq(ref, "", "p", `{"id":"1","pk":"p"}`)); err != nil {
		t.Fatal(err)
	}
	if res, err := e.ReadItem(ctx, resolvedReq(ref, "1", "p", "")); err != nil || res.Status != 200 {
		t.Fatalf("read through the resolved container: %v", err)
	}
	if res, err := e.QueryItems(ctx, resolvedQuery(ref, "p")); err != nil || len(res.Items) != 1 || res.Container != ref.Container() {
		t.Fatalf("query through the resolved container: %v", err)
	}
	// A reference to another container is not taken for this one.
	other := resolvedReq(ref, "1", "p", "")
	other.Container = "nope"
	if _, err := e.ReadItem(ctx, other); statusOf(err) != 404 {
		t.Fatalf("read of a missing container with another's reference: %v, want 404", err)
	}
	checkStaleRefIsLookedUpAgain(t, ctx, e, e, ref)
}

// TestSharedResolvedContainerChangedOnTheOtherGatewayIsLookedUpAgain: on a
// shared store, a container resolved on A and deleted and made again on B
// is checked at the catalog version A resolved it at.
func TestSharedResolvedContainerChangedOnTheOtherGatewayIsLookedUpAgain(t *testing.T) {
	ctx := t.Context()
	sharedPairs(t, func(t *testing.T, a, b *Engine) {
		ref, err := a.ResolveContainer(ctx, "db", "c")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.UpsertItem(ctx, resolvedReq(ref, "", "p", `{"id":"1","pk":"p"}`)); err != nil {
			t.Fatal(err)
		}
		checkStaleRefIsLookedUpAgain(t, ctx, a, b, ref)
	})
}
