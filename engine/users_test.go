package engine

import (
	"bytes"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/rids"
)

func TestParseResourceLink(t *testing.T) {
	for _, tc := range []struct {
		link string
		ok   bool
	}{
		{"dbs/db", true},
		{"dbs/pdb/colls/c", true},
		{"/dbs/db/colls/c/", true},
		{"dbs/db/colls/c/docs/1", true},
		{"dbs/db/colls/c/sprocs/s", true},
		{"dbs/AAAAAQ==/colls/AAAAAQAAAAI=/", true},
		{"", false},
		{"dbs", false},
		{"colls/c", false},
		{"dbs/db/users/u", false},
		{"dbs/db/colls/c/pkranges/0", false},
		{"dbs//colls/c", false},
		{"dbs/db/colls/c/docs/1/attachments/a", false},
	} {
		_, err := ParseResourceLink(tc.link)
		if (err == nil) != tc.ok {
			t.Errorf("ParseResourceLink(%q): %v, want ok=%v", tc.link, err, tc.ok)
		}
		if err != nil && err.Status != 400 {
			t.Errorf("ParseResourceLink(%q): status %d, want 400", tc.link, err.Status)
		}
	}
}

func TestDeletingADatabaseDeletesItsUsersAndPermissions(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"pdb"}`), nil); err != nil {
		t.Fatal(err)
	}
	user, err := e.CreateUser(ctx, "pdb", []byte(`{"id":"u"}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.CreatePermission(ctx, "pdb", "u", []byte(`{"id":"p","permissionMode":"read","resource":"dbs/pdb/colls/c","resourcePartitionKey":["a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != PermissionRead || p.Link != "dbs/pdb/colls/c" || !p.HasPartitionKey || !p.PartitionKey.Equal(StringKey("a")) {
		t.Fatalf("permission %+v", p)
	}
	prid, _ := rids.Decode(p.RID, 16)
	urid, _ := rids.Decode(user.RID, 8)
	if !bytes.HasPrefix(prid, urid) {
		t.Fatalf("permission RID %q does not extend user RID %q", p.RID, user.RID)
	}
	if got, err := e.PermissionByRID(ctx, p.RID); err != nil || got.ID != "p" {
		t.Fatalf("PermissionByRID: %v, %v", got, err)
	}
	if err := e.DeleteDatabase(ctx, "pdb", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"pdb"}`), nil); err != nil {
		t.Fatal(err)
	}
	if users, err := e.ListUsers(ctx, "pdb"); err != nil || len(users) != 0 {
		t.Fatalf("users of the recreated database: %v, %v", users, err)
	}
	if _, err := e.PermissionByRID(ctx, p.RID); statusOf(err) != 404 {
		t.Fatalf("PermissionByRID after the database was deleted: %v, want 404", err)
	}
	for _, prefix := range []byte{keys.User, keys.Permission, keys.PrincipalRID} {
		it, err := e.store.NewIterator(ctx, []byte{prefix}, []byte{prefix + 1}, false)
		if err != nil {
			t.Fatal(err)
		}
		if it.Next() {
			t.Errorf("a record of the deleted database's users or permissions is left: %q", it.Key())
		}
		it.Close()
	}
}

func TestPermissionsFoundByRIDUntilDeleted(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"pdb"}`), nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		delete func(user, perm string) error
	}{
		{"permission deleted", func(user, perm string) error { return e.DeletePermission(ctx, "pdb", user, perm, "") }},
		{"user deleted", func(user, _ string) error { return e.DeleteUser(ctx, "pdb", user, "") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user, err := e.CreateUser(ctx, "pdb", []byte(`{"id":"u"}`))
			if err != nil {
				t.Fatal(err)
			}
			p, err := e.CreatePermission(ctx, "pdb", user.RID, []byte(`{"id":"p","permissionMode":"All","resource":"dbs/pdb"}`))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := e.ReadPermission(ctx, "pdb", "u", p.RID); err != nil || got.ID != "p" {
				t.Fatalf("ReadPermission by RID: %v, %v", got, err)
			}
			if got, err := e.PermissionByRID(ctx, p.RID); err != nil || got.Mode != PermissionAll {
				t.Fatalf("PermissionByRID: %v, %v", got, err)
			}
			if err := tc.delete("u", "p"); err != nil {
				t.Fatal(err)
			}
			if _, err := e.PermissionByRID(ctx, p.RID); statusOf(err) != 404 {
				t.Fatalf("PermissionByRID after delete: %v, want 404", err)
			}
			e.DeleteUser(ctx, "pdb", "u", "")
			if _, err := e.ReadUser(ctx, "pdb", user.RID); statusOf(err) != 404 {
				t.Fatalf("ReadUser by RID after delete: %v, want 404", err)
			}
		})
	}
}

// TestAPermissionIsFoundByRIDThroughRenamesOfItAndItsUser: a permission is
// found by its RID (as a resource token names it) after its user and
// itself are renamed, with the grant of its last replace; not once its
// user, renamed, is deleted; and a user whose id is another user's RID
// does not stand in for that user.
func TestAPermissionIsFoundByRIDThroughRenamesOfItAndItsUser(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"pdb"}`), nil); err != nil {
		t.Fatal(err)
	}
	user, err := e.CreateUser(ctx, "pdb", []byte(`{"id":"u"}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.CreatePermission(ctx, "pdb", "u", []byte(`{"id":"p","permissionMode":"Read","resource":"dbs/pdb"}`))
	if err != nil {
		t.Fatal(err)
	}
	// A user named by the first one's RID, with a permission of that id.
	if _, err := e.CreateUser(ctx, "pdb", []byte(`{"id":"`+user.RID+`"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreatePermission(ctx, "pdb", user.RID, []byte(`{"id":"`+p.RID+`","permissionMode":"All","resource":"dbs/pdb/colls/x"}`)); err != nil {
		t.Fatal(err)
	}
	if got, err := e.PermissionByRID(ctx, p.RID); err != nil || got.ID != "p" || got.Mode != PermissionRead || got.Link != "dbs/pdb" {
		t.Fatalf("PermissionByRID: %+v, %v; want the permission p, Read on dbs/pdb", got, err)
	}
	if _, err := e.ReplaceUser(ctx, "pdb", "u", []byte(`{"id":"u2"}`), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ReplacePermission(ctx, "pdb", "u2", "p", []byte(`{"id":"p2","permissionMode":"All","resource":"dbs/pdb"}`), ""); err != nil {
		t.Fatal(err)
	}
	got, err := e.PermissionByRID(ctx, p.RID)
	if err != nil || got.ID != "p2" || got.RID != p.RID || got.Mode != PermissionAll {
		t.Fatalf("PermissionByRID after the renames: %+v, %v; want p2, All, RID %s", got, err, p.RID)
	}
	if err := e.DeleteUser(ctx, "pdb", "u2", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.PermissionByRID(ctx, p.RID); statusOf(err) != 404 {
		t.Fatalf("PermissionByRID after its renamed user was deleted: %v, want 404", err)
	}
}
