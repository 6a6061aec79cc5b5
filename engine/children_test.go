package engine

import "testing"

// TestAChildsIDIsNeverReadAsAnotherChildsRID: a read finds a child by id
// or RID, but a create or upsert names the child by its id alone, so that a
// user whose id happens to be another user's RID is a user of its own, not
// a conflict with (or a rename of) the other.
func TestAChildsIDIsNeverReadAsAnotherChildsRID(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"udb"}`), nil); err != nil {
		t.Fatal(err)
	}
	first, err := e.CreateUser(ctx, "udb", []byte(`{"id":"first"}`))
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.CreateUser(ctx, "udb", []byte(`{"id":"`+first.RID+`"}`))
	if err != nil {
		t.Fatalf("a user named as another's RID: %v", err)
	}
	again, created, err := e.UpsertUser(ctx, "udb", []byte(`{"id":"`+first.RID+`","note":1}`))
	if err != nil || created || again.RID != second.RID {
		t.Fatalf("upsert of the user named as another's RID: created %v, RID %v (want %s), %v", created, again, second.RID, err)
	}
	if got, err := e.ReadUser(ctx, "udb", "first"); err != nil || got.RID != first.RID {
		t.Fatalf("the first user after the upsert: %v, %v", got, err)
	}
	if list, err := e.ListUsers(ctx, "udb"); err != nil || len(list) != 2 {
		t.Fatalf("users: %v, %v", list, err)
	}
}
