package engine

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/pebble"
)

// uniqueUsersDB creates database "db" with a container "c" whose unique key
// policy makes /email unique, holding one item.
func uniqueUsersDB(t *testing.T, e *Engine) {
	t.Helper()
	ctx := t.Context()
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]},
		"uniqueKeyPolicy":{"uniqueKeys":[{"paths":["/email"]}]}}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateItem(ctx, req("1", "p", `{"id":"1","pk":"p","email":"a@example.com"}`)); err != nil {
		t.Fatal(err)
	}
}

// TestUsersAreListedBesideUniqueKeys: listing a database's users reads the
// users only, not the unique-key entries of its containers (it once failed
// with "invalid character 'D'", a 500, as soon as one container had a
// unique key policy and an item).
func TestUsersAreListedBesideUniqueKeys(t *testing.T) {
	ctx := t.Context()
	e, err := Open(ctx, newTestStore(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	uniqueUsersDB(t, e)
	if users, err := e.ListUsers(ctx, "db"); err != nil || len(users) != 0 {
		t.Fatalf("ListUsers before any user: %d users, %v; want none", len(users), err)
	}
	if _, err := e.CreateUser(ctx, "db", []byte(`{"id":"alice"}`)); err != nil {
		t.Fatal(err)
	}
	users, err := e.ListUsers(ctx, "db")
	if err != nil || len(users) != 1 || users[0].ID != "alice" {
		t.Fatalf("ListUsers: %v, %v; want alice", users, err)
	}
	if err := e.DeleteUser(ctx, "db", "alice", ""); err != nil {
		t.Fatal(err)
	}
	// The unique key still holds after the user's delete.
	if _, err := e.CreateItem(ctx, req("2", "p", `{"id":"2","pk":"p","email":"a@example.com"}`)); statusOf(err) != 409 {
		t.Fatalf("a second item with the same unique email: %v, want 409", err)
	}
}

// downgradeLayout rewrites s into key layout format 1, as engines before
// keys.Format 2 wrote it: unique-key entries under the users' byte, and no
// format record.
func downgradeLayout(t *testing.T, s storage.Store) {
	t.Helper()
	ctx := t.Context()
	lower := []byte{keys.Unique}
	b := s.NewBatch()
	defer b.Close()
	it, err := s.NewIterator(ctx, lower, storage.PrefixEnd(lower), false)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ; it.Next(); n++ {
		if err := b.Set(append([]byte{keys.LegacyUnique}, it.Key()[1:]...), bytes.Clone(it.Value())); err != nil {
			t.Fatal(err)
		}
		if err := b.Delete(bytes.Clone(it.Key())); err != nil {
			t.Fatal(err)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	it.Close()
	if n == 0 {
		t.Fatal("no unique-key entries to downgrade")
	}
	if err := b.Delete(keys.MetaFormat); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestOldLayoutStoreIsRewrittenAtOpen opens a store in key layout format 1
// holding users and unique-key entries in one database, on Pebble and on
// the pass's store (memory, or PostgreSQL): Open moves the entries to
// their own prefix, nothing lost, and records the format.
func TestOldLayoutStoreIsRewrittenAtOpen(t *testing.T) {
	skipOnPlaced(t, "a store of layout format 1 is one database; the rewrite writes its unique keys in place 0")
	t.Run("pebble", func(t *testing.T) {
		dir := t.TempDir()
		open := func() storage.Store {
			s, err := pebble.Open(dir, pebble.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		s := open()
		writeOldLayout(t, s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open()
		defer s.Close()
		checkUpgradedLayout(t, s)
	})
	t.Run("pass", func(t *testing.T) {
		s := newTestStore(t)
		writeOldLayout(t, s)
		checkUpgradedLayout(t, s)
	})
}

// writeOldLayout fills s as an engine of format 1 would have: a user and
// unique-key entries in one database.
func writeOldLayout(t *testing.T, s storage.Store) {
	t.Helper()
	ctx := t.Context()
	e, err := Open(ctx, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	uniqueUsersDB(t, e)
	if _, err := e.CreateItem(ctx, req("2", "q", `{"id":"2","pk":"q","email":"b@example.com"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateUser(ctx, "db", []byte(`{"id":"alice"}`)); err != nil {
		t.Fatal(err)
	}
	e.Close()
	downgradeLayout(t, s)
}

func checkUpgradedLayout(t *testing.T, s storage.Store) {
	t.Helper()
	ctx := t.Context()
	e, err := Open(ctx, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	users, err := e.ListUsers(ctx, "db")
	if err != nil || len(users) != 1 || users[0].ID != "alice" {
		t.Fatalf("ListUsers after the upgrade: %v, %v; want alice", users, err)
	}
	if got := countKeys(t, s, []byte{keys.Unique}); got != 2 {
		t.Errorf("%d unique-key entries after the upgrade, want 2", got)
	}
	if got := countKeys(t, s, []byte{keys.LegacyUnique}); got != 1 {
		t.Errorf("%d keys under the users' byte after the upgrade, want 1 (alice)", got)
	}
	v, err := s.Get(ctx, keys.MetaFormat)
	if err != nil || len(v) != 8 || binary.BigEndian.Uint64(v) != keys.Format {
		t.Errorf("format record %x, %v; want %d", v, err, keys.Format)
	}
	// The moved entries still hold the unique key, in both partitions.
	if _, err := e.CreateItem(ctx, req("3", "p", `{"id":"3","pk":"p","email":"a@example.com"}`)); statusOf(err) != 409 {
		t.Errorf("a duplicate email in partition p: %v, want 409", err)
	}
	if _, err := e.CreateItem(ctx, req("4", "q", `{"id":"4","pk":"q","email":"b@example.com"}`)); statusOf(err) != 409 {
		t.Errorf("a duplicate email in partition q: %v, want 409", err)
	}
	// And a delete frees its value.
	if _, err := e.DeleteItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: "1", PartitionKey: StringKey("p"), HasPartitionKey: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateItem(ctx, req("3", "p", `{"id":"3","pk":"p","email":"a@example.com"}`)); err != nil {
		t.Errorf("the email of a deleted item: %v", err)
	}
	if got := countKeys(t, s, []byte{keys.Unique}); got != 2 {
		t.Errorf("%d unique-key entries after a delete and a create, want 2", got)
	}
}
