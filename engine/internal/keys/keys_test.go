package keys

import (
	"bytes"
	"strings"
	"testing"
)

// family is one family of keys: the prefix every key of it under the
// given RIDs starts with.
type family struct {
	name   string
	prefix func(r rids) []byte
}

// rids are the parents a key names: a database, a container and a user of
// it, a permission of that user, an item of the container.
type rids struct {
	db, coll, user, perm, item []byte
}

// families is every family of keys the engine writes, each as the prefix
// of all its keys under one parent.
var families = []family{
	{"meta/sequence", func(rids) []byte { return MetaSequence }},
	{"meta/index format", func(rids) []byte { return MetaIndexFormat }},
	{"meta/catalog version", func(rids) []byte { return MetaCatalogVersion }},
	{"meta/format", func(rids) []byte { return MetaFormat }},
	{"meta/index rebuild", func(r rids) []byte { return IndexRebuild(r.coll) }},
	{"meta/expiry rebuild", func(r rids) []byte { return ExpiryRebuild(r.coll) }},
	{"database", func(rids) []byte { return []byte{Database} }},
	{"container", func(r rids) []byte { return ContainerPrefix(r.db) }},
	{"script", func(r rids) []byte { return ChildContainerPrefix(r.coll) }},
	{"offer", func(rids) []byte { return []byte{Offer} }},
	{"item", func(r rids) []byte { return ItemContainerPrefix(r.coll) }},
	{"feed", func(r rids) []byte { return FeedPrefix(r.coll) }},
	{"rid", func(r rids) []byte { return RIDPrefix(r.coll) }},
	{"version", func(r rids) []byte { return VersionPrefix(r.coll) }},
	{"expiry", func(r rids) []byte { return ExpiryPrefix(r.coll) }},
	{"index", func(r rids) []byte { return IndexPrefix(r.coll) }},
	{"order", func(r rids) []byte { return OrderPrefix(r.coll) }},
	{"unique", func(r rids) []byte { return UniquePrefix(r.coll) }},
	{"user", func(r rids) []byte { return UserPrefix(r.db) }},
	{"permission", func(r rids) []byte { return PermissionPrefix(r.user) }},
	{"principal rid", func(r rids) []byte { return PrincipalRIDKey(r.user) }},
	{"client encryption key", func(r rids) []byte { return EncryptionKeyPrefix(r.db) }},
	{"search meta", func(r rids) []byte { return SearchMetaKey(r.coll) }},
	{"search vector /v", func(r rids) []byte { return SearchIndexPrefix(r.coll, SearchVector, "/v") }},
	{"search vector /vv", func(r rids) []byte { return SearchIndexPrefix(r.coll, SearchVector, "/vv") }},
	{"search full-text /v", func(r rids) []byte { return SearchIndexPrefix(r.coll, SearchFullText, "/v") }},
	{"search changes", func(r rids) []byte { return SearchChangePrefix(r.coll) }},
}

// nestings are RIDs as the engine makes them: a container's and a user's
// start with their database's, a permission's with its user's; and the
// corner cases of one family's parent being the other's, or every byte
// equal.
func nestings() []rids {
	db := []byte{0, 0, 0, 1}
	nested := rids{
		db:   db,
		coll: append(bytes.Clone(db), 0, 0, 0, 2),
		user: append(bytes.Clone(db), 0, 0, 0, 2),
		item: []byte{0, 0, 0, 0, 0, 0, 0, 3},
	}
	nested.perm = append(bytes.Clone(nested.user), 0, 0, 0, 0, 0, 0, 0, 4)
	same := rids{db: []byte("DDDD"), coll: []byte("DDDDDDDD"), user: []byte("DDDDDDDD"), item: []byte("DDDDDDDD")}
	same.perm = []byte("DDDDDDDDDDDDDDDD")
	zero := rids{db: make([]byte, 4), coll: make([]byte, 8), user: make([]byte, 8), perm: make([]byte, 16), item: make([]byte, 8)}
	ones := rids{db: bytes.Repeat([]byte{0xff}, 4), coll: bytes.Repeat([]byte{0xff}, 8), user: bytes.Repeat([]byte{0xff}, 8),
		perm: bytes.Repeat([]byte{0xff}, 16), item: bytes.Repeat([]byte{0xff}, 8)}
	return []rids{nested, same, zero, ones}
}

// TestFamiliesAreDisjoint proves every two families' key ranges disjoint
// under every nesting of RIDs: no family's prefix is a prefix of another's,
// so a scan of one never meets the other's keys.
func TestFamiliesAreDisjoint(t *testing.T) {
	for n, r := range nestings() {
		for i, a := range families {
			for _, b := range families[i+1:] {
				pa, pb := a.prefix(r), b.prefix(r)
				if bytes.HasPrefix(pa, pb) || bytes.HasPrefix(pb, pa) {
					t.Errorf("nesting %d: %s keys (%q…) and %s keys (%q…) overlap", n, a.name, pa, b.name, pb)
				}
			}
		}
	}
}

// TestKeysStayInTheirFamily checks that every key shape starts with its
// family's prefix, so the families above are all the keys there are.
func TestKeysStayInTheirFamily(t *testing.T) {
	r := nestings()[0]
	pk := []byte(`["p"]`)
	for _, tc := range []struct {
		key, prefix []byte
	}{
		{ContainerKey(r.db, "c"), ContainerPrefix(r.db)},
		{ChildKey(r.coll, "sprocs", "s"), ChildContainerPrefix(r.coll)},
		{ChildPrefix(r.coll, "udfs"), ChildContainerPrefix(r.coll)},
		{ItemPartitionPrefix(r.coll, []byte{1, 2}, pk), ItemContainerPrefix(r.coll)},
		{ItemKeyFromSuffix(r.coll, []byte("x")), ItemContainerPrefix(r.coll)},
		{FeedKey(r.coll, 7, r.item), FeedPrefix(r.coll)},
		{RIDKey(r.coll, r.item), RIDPrefix(r.coll)},
		{VersionKey(r.coll, 7, 1), VersionPrefix(r.coll)},
		{VersionHorizon(r.coll), VersionPrefix(r.coll)},
		{ExpiryKey(r.coll, ExpiryByDeadline, 5, r.item), ExpiryPrefix(r.coll)},
		{IndexPathPrefix(r.coll, "/a"), IndexPrefix(r.coll)},
		{SpatialIndexPathPrefix(r.coll, "/a"), IndexPrefix(r.coll)},
		{OrderKey(ItemPartitionPrefix(r.coll, []byte{1}, pk), 3), OrderPrefix(r.coll)},
		{OrderScope(ItemPartitionPrefix(r.coll, []byte{1}, pk)), OrderPrefix(r.coll)},
		{UniquePartitionPrefix(r.coll, pk), UniquePrefix(r.coll)},
		{UserKey(r.db, "u"), UserPrefix(r.db)},
		{PrincipalRIDKey(r.perm), PrincipalRIDKey(r.user)},
		{DatabaseKey("db"), []byte{Database}},
		{OfferKey("o"), []byte{Offer}},
		{SearchMetaKey(r.coll), SearchPrefix(r.coll)},
		{SearchIndexPrefix(r.coll, SearchVector, "/v"), SearchPrefix(r.coll)},
		{SearchIndexPrefix(r.coll, SearchFullText, "/t"), SearchPrefix(r.coll)},
		{SearchChangeKey(r.coll, 7, []byte("x")), SearchChangePrefix(r.coll)},
		{SearchChangeHorizon(r.coll), SearchChangePrefix(r.coll)},
		{SearchChangePrefix(r.coll), SearchPrefix(r.coll)},
	} {
		if !bytes.HasPrefix(tc.key, tc.prefix) {
			t.Errorf("key %q is outside its family %q", tc.key, tc.prefix)
		}
	}
}

// TestLegacyUniqueOverlappedUsers is why Format 2 exists: under format 1's
// byte, a database's users range held its containers' unique-key entries.
func TestLegacyUniqueOverlappedUsers(t *testing.T) {
	r := nestings()[0]
	legacy := append([]byte{LegacyUnique}, r.coll...)
	if !bytes.HasPrefix(legacy, UserPrefix(r.db)) {
		t.Fatal("format 1's unique-key entries did not overlap the users: LegacyUnique is wrong")
	}
	if Unique == LegacyUnique {
		t.Fatalf("unique-key entries still share byte %q with users", Unique)
	}
}

// TestSpatialEntriesAreDisjointFromPropertyEntries: inside a container's
// index family, the spatial entries of a path and the property entries of
// any path never share a prefix, nor do two paths' spatial entries, under
// every nesting of RIDs; so a scan of one never meets the other.
func TestSpatialEntriesAreDisjointFromPropertyEntries(t *testing.T) {
	paths := []string{"/", "/a", "/ab", "/a/b", "/\x00", "/" + strings.Repeat("x", 200), "/" + strings.Repeat("y", 127)}
	for n, r := range nestings() {
		for _, p := range paths {
			sp := SpatialIndexPathPrefix(r.coll, p)
			for _, q := range paths {
				ip := IndexPathPrefix(r.coll, q)
				if bytes.HasPrefix(sp, ip) || bytes.HasPrefix(ip, sp) {
					t.Errorf("nesting %d: spatial entries of %q (%q) and property entries of %q (%q) overlap", n, p, sp, q, ip)
				}
				if sq := SpatialIndexPathPrefix(r.coll, q); p != q && (bytes.HasPrefix(sp, sq) || bytes.HasPrefix(sq, sp)) {
					t.Errorf("nesting %d: spatial entries of %q and %q overlap", n, p, q)
				}
			}
		}
	}
}

// TestItemKeySplitsIntoWhatBuiltIt: an item key made of a partition prefix
// and an id gives back its effective partition key, encoded partition key
// and id, and a truncated key is refused rather than misread.
func TestItemKeySplitsIntoWhatBuiltIt(t *testing.T) {
	coll := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	epk := bytes.Repeat([]byte{0xab}, 32)
	pk := []byte(`["a",{}]`)
	key := append(ItemPartitionPrefix(coll, epk, pk), "item-1"...)
	if got := ItemEPK(coll, len(epk), key); !bytes.Equal(got, epk) {
		t.Fatalf("ItemEPK = %x, want %x", got, epk)
	}
	id, enc, ok := SplitItemKey(coll, len(epk), key)
	if !ok || id != "item-1" || !bytes.Equal(enc, pk) {
		t.Fatalf("SplitItemKey = %q, %q, %v; want item-1, %q", id, enc, ok, pk)
	}
	for n := 0; n < 1+len(coll)+len(epk)+2+len(pk); n++ {
		if _, _, ok := SplitItemKey(coll, len(epk), key[:n]); ok {
			t.Fatalf("SplitItemKey accepted a key cut to %d bytes", n)
		}
	}
	if ItemEPK(coll, len(epk), key[:len(coll)+len(epk)]) != nil {
		t.Fatal("ItemEPK read past a short key")
	}
}

// TestIndexEntriesTellWhereTheirValueStarts: property and spatial entries
// alike give the offset of their value, so code that places or moves an
// entry with its item finds the item's key suffix after it.
func TestIndexEntriesTellWhereTheirValueStarts(t *testing.T) {
	coll := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	value := []byte{0x05, 1, 2, 3, 4, 5, 6, 7, 8}
	for _, path := range []string{"/a", "/" + strings.Repeat("x", 200)} {
		for name, prefix := range map[string][]byte{
			"property": IndexPathPrefix(coll, path),
			"spatial":  SpatialIndexPathPrefix(coll, path),
		} {
			key := append(append(append([]byte(nil), prefix...), value...), "suffix"...)
			start, ok := IndexEntryValueStart(key)
			if !ok || start != len(prefix) {
				t.Errorf("%s entry of %q: value at %d, %v; want %d", name, path, start, ok, len(prefix))
			}
			if _, ok := IndexEntryValueStart(prefix[:len(prefix)-1]); ok {
				t.Errorf("%s entry of %q cut short was read as an entry", name, path)
			}
		}
	}
}

// TestAppendedItemPartitionPrefixIsItemPartitionPrefix checks that the
// prefix built in one buffer is ItemPartitionPrefix's, that the encoded key
// it returns is the prefix's tail, and that an append to that key leaves
// the prefix as it was.
func TestAppendedItemPartitionPrefixIsItemPartitionPrefix(t *testing.T) {
	coll := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	epk := bytes.Repeat([]byte{0xAB}, 32)
	for _, enc := range []string{`["p"]`, `[]`, `["` + strings.Repeat("x", 300) + `"]`} {
		prefix, pkEnc := AppendedItemPartitionPrefix(coll, len(epk),
			func(b []byte) []byte { return append(b, epk...) },
			func(b []byte) []byte { return append(b, enc...) })
		want := ItemPartitionPrefix(coll, epk, []byte(enc))
		if !bytes.Equal(prefix, want) {
			t.Errorf("prefix of %s = %x, want %x", enc, prefix, want)
		}
		if string(pkEnc) != enc {
			t.Errorf("encoded key = %s, want %s", pkEnc, enc)
		}
		_ = append(pkEnc, "tail"...)
		if !bytes.Equal(prefix, want) {
			t.Errorf("an append to the encoded key %s changed the prefix to %x", enc, prefix)
		}
	}
}
