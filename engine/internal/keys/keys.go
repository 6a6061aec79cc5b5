package keys

import (
	"encoding/binary"
	"math"
)

// The first byte of each family of keys.
const (
	Meta      byte = 'M' // M<name>                                  → engine metadata
	Database  byte = 'B' // B<db name>                               → database record
	Container byte = 'C' // C<db rid 4><coll name>                   → container record
	Child     byte = 'S' // S<coll rid 8><type>0x00<id>              → script, trigger, udf
	Offer     byte = 'O' // O<offer rid>                             → offer
	Item      byte = 'D' // D<coll rid 8><epk><pk len 2><pk><id>     → item
	Feed      byte = 'F' // F<coll rid 8><lsn 8><item rid 8>         → item key (latest version)
	RID       byte = 'R' // R<coll rid 8><item rid 8>                → item key
	Version   byte = 'V' // V<coll rid 8><lsn 8><n 4>                → change record (all versions and deletes)
	Expiry    byte = 'X' // X<coll rid 8><kind 1><time 8><item rid 8> → item key (TTL sweep index)
	Index     byte = 'I' // I<coll rid 8><path len><path><value><item key suffix> → nothing
	//                          I<coll rid 8>0x00<path len><path><cell 9><item key suffix> → nothing (spatial)
	Order         byte = 'N' // N<coll rid 8><epk><pk len 2><pk><item rid 8> → item key (creation order)
	Unique        byte = 'Q' // Q<coll rid 8><pk len uvarint><pk><key number 1><values> → item key
	User          byte = 'U' // U<db rid 4><user id>                     → user
	Permission    byte = 'P' // P<user rid 8><permission id>             → permission
	PrincipalRID  byte = 'G' // G<user or permission rid>                → the user's or permission's key
	EncryptionKey byte = 'K' // K<db rid 4><key id>                     → client encryption key
	Search        byte = 'H' // H<coll rid 8><kind 1><path len uvarint><path><rest> → search index state
)

// LegacyUnique is the first byte of unique-key entries in layout format 1,
// the users' byte.
const LegacyUnique byte = 'U'

// Format is the version of the key layout. Format 1 (stores without a
// MetaFormat record) kept unique-key entries under User's byte. Format 2
// kept an expiry entry for every item that may ever expire, whatever its
// container's time to live; format 3 keeps them only where the container's
// defaultTtl makes the item expire (see engine/expiry.go).
const Format = 3

// Metadata records.
var (
	// MetaSequence holds the sequencer's next block of sequence numbers.
	MetaSequence = []byte{Meta, 's', 'e', 'q'}
	// MetaIndexFormat holds the format the store's indexes are in.
	MetaIndexFormat = []byte{Meta, 'i', 'x', 'f'}
	// MetaCatalogVersion changes with every catalog change on a shared store.
	MetaCatalogVersion = []byte{Meta, 'c', 'a', 't'}
	// MetaFormat holds the Format the store's keys are laid out in.
	MetaFormat = []byte{Meta, 'f', 'm', 't'}
)

// IndexRebuild marks a container whose index is being rebuilt for a new
// indexing policy; it is removed by the rebuild's last batch.
func IndexRebuild(collRID []byte) []byte {
	return append([]byte{Meta, 'i', 'x', 'r'}, collRID...)
}

// ExpiryRebuild marks a container whose expiry index is being built or
// dropped for a new defaultTtl; it is removed by the build's last batch.
func ExpiryRebuild(collRID []byte) []byte {
	return append([]byte{Meta, 'x', 'p', 'r'}, collRID...)
}

// CatalogLock is the store lock that catalog changes hold exclusively and
// writes hold shared.
var CatalogLock = []byte{Meta, 'c', 'a', 't', 'l', 'o', 'c', 'k'}

// PartitionLock names the store lock of a logical partition.
func PartitionLock(collRID, pkEnc []byte) []byte {
	k := make([]byte, 0, 1+len(collRID)+len(pkEnc))
	k = append(k, Item)
	k = append(k, collRID...)
	return append(k, pkEnc...)
}

func withRID(prefix byte, rid []byte) []byte {
	k := make([]byte, 0, 1+len(rid)+24)
	k = append(k, prefix)
	return append(k, rid...)
}

// DatabaseKey is the record of the database named name.
func DatabaseKey(name string) []byte {
	return append([]byte{Database}, name...)
}

// ContainerKey is the record of container name of the database dbRID.
func ContainerKey(dbRID []byte, name string) []byte {
	return append(ContainerPrefix(dbRID), name...)
}

// ContainerPrefix prefixes the records of a database's containers.
func ContainerPrefix(dbRID []byte) []byte { return withRID(Container, dbRID) }

// ChildPrefix prefixes a container's scripts of one kind.
func ChildPrefix(collRID []byte, kind string) []byte {
	k := append(withRID(Child, collRID), kind...)
	return append(k, 0)
}

// ChildKey is the record of one script, trigger or user-defined function.
func ChildKey(collRID []byte, kind, id string) []byte {
	return append(ChildPrefix(collRID, kind), id...)
}

// ChildContainerPrefix prefixes every script of a container.
func ChildContainerPrefix(collRID []byte) []byte { return withRID(Child, collRID) }

// OfferKey is the record of the offer with RID rid.
func OfferKey(rid string) []byte {
	return append([]byte{Offer}, rid...)
}

// ItemPartitionPrefix is the key prefix of every item of one logical
// partition.
func ItemPartitionPrefix(collRID, epk, pkEnc []byte) []byte {
	k := make([]byte, 0, 1+len(collRID)+len(epk)+2+len(pkEnc)+32)
	k = append(k, Item)
	k = append(k, collRID...)
	k = append(k, epk...)
	k = binary.BigEndian.AppendUint16(k, uint16(len(pkEnc)))
	return append(k, pkEnc...)
}

// AppendedItemPartitionPrefix is ItemPartitionPrefix built in one buffer:
// appendEPK and appendEnc append the effective partition key (epkLen bytes)
// and the encoded key to it. pkEnc is the encoded key within the prefix,
// capped so that an append to it cannot write into the prefix.
func AppendedItemPartitionPrefix(collRID []byte, epkLen int, appendEPK, appendEnc func([]byte) []byte) (prefix, pkEnc []byte) {
	return AppendItemPartitionPrefix(make([]byte, 0, 1+len(collRID)+epkLen+2+32+32), collRID, appendEPK, appendEnc)
}

// AppendItemPartitionPrefix is AppendedItemPartitionPrefix appending to
// k: the prefix is k's bytes and those appended.
func AppendItemPartitionPrefix(k, collRID []byte, appendEPK, appendEnc func([]byte) []byte) (prefix, pkEnc []byte) {
	k = append(k, Item)
	k = append(k, collRID...)
	k = appendEPK(k)
	at := len(k)
	k = appendEnc(append(k, 0, 0))
	binary.BigEndian.PutUint16(k[at:], uint16(len(k)-at-2))
	return k, k[at+2 : len(k) : len(k)]
}

// ItemContainerPrefix is the key prefix of every item of a container.
func ItemContainerPrefix(collRID []byte) []byte { return withRID(Item, collRID) }

// ItemKeyFromSuffix is the item key whose part after the container's
// prefix is suffix (as index entries keep it).
func ItemKeyFromSuffix(collRID, suffix []byte) []byte {
	k := make([]byte, 0, 1+len(collRID)+len(suffix))
	k = append(k, Item)
	k = append(k, collRID...)
	return append(k, suffix...)
}

// ItemEPK returns the effective partition key part, epkLen bytes, of an
// item key of the container with RID collRID; nil when the key is shorter.
func ItemEPK(collRID []byte, epkLen int, key []byte) []byte {
	start := 1 + len(collRID)
	end := start + epkLen
	if len(key) < end {
		return nil
	}
	return key[start:end]
}

// SplitItemKey returns the id and the encoded partition key of an item key
// of the container with RID collRID, whose effective partition keys are
// epkLen bytes long.
func SplitItemKey(collRID []byte, epkLen int, key []byte) (id string, pkEnc []byte, ok bool) {
	off := 1 + len(collRID) + epkLen
	if len(key) < off+2 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint16(key[off:]))
	off += 2
	if len(key) < off+n {
		return "", nil, false
	}
	return string(key[off+n:]), key[off : off+n], true
}

// FeedPrefix prefixes a container's latest-version feed entries.
func FeedPrefix(collRID []byte) []byte { return withRID(Feed, collRID) }

// FeedKey is the feed entry of an item written at sequence number lsn.
func FeedKey(collRID []byte, lsn uint64, itemRID []byte) []byte {
	return AppendFeedKey(make([]byte, 0, 1+len(collRID)+8+len(itemRID)), collRID, lsn, itemRID)
}

// AppendFeedKey appends FeedKey(collRID, lsn, itemRID) to k.
func AppendFeedKey(k, collRID []byte, lsn uint64, itemRID []byte) []byte {
	k = append(append(k, Feed), collRID...)
	k = binary.BigEndian.AppendUint64(k, lsn)
	return append(k, itemRID...)
}

// RIDKey is the RID index entry of an item.
func RIDKey(collRID, itemRID []byte) []byte {
	return AppendRIDKey(make([]byte, 0, 1+len(collRID)+len(itemRID)), collRID, itemRID)
}

// AppendRIDKey appends RIDKey(collRID, itemRID) to k.
func AppendRIDKey(k, collRID, itemRID []byte) []byte {
	return append(append(append(k, RID), collRID...), itemRID...)
}

// RIDPrefix prefixes a container's RID index.
func RIDPrefix(collRID []byte) []byte { return withRID(RID, collRID) }

// VersionPrefix prefixes a container's change records.
func VersionPrefix(collRID []byte) []byte { return withRID(Version, collRID) }

// VersionKey addresses the n-th change record a transaction with sequence
// number lsn wrote.
func VersionKey(collRID []byte, lsn uint64, n uint32) []byte {
	k := VersionPrefix(collRID)
	k = binary.BigEndian.AppendUint64(k, lsn)
	return binary.BigEndian.AppendUint32(k, n)
}

// VersionHorizon holds the highest sequence number whose change records may
// have been pruned. It sorts before every record (sequence numbers start
// at 1), so scans never meet it.
func VersionHorizon(collRID []byte) []byte { return VersionKey(collRID, 0, 0) }

// Kinds of expiry index entries: items that inherit the container's
// defaultTtl are indexed by their modification time (they expire in that
// order whatever the default is), items with their own ttl by the time they
// expire.
const (
	ExpiryByModified byte = 0
	ExpiryByDeadline byte = 1
)

// ExpiryPrefix prefixes a container's expiry index.
func ExpiryPrefix(collRID []byte) []byte { return withRID(Expiry, collRID) }

// ExpiryKindPrefix prefixes a container's expiry entries of one kind.
func ExpiryKindPrefix(collRID []byte, kind byte) []byte {
	return append(ExpiryPrefix(collRID), kind)
}

// ExpiryKey is an item's entry in the expiry index.
func ExpiryKey(collRID []byte, kind byte, at int64, itemRID []byte) []byte {
	k := ExpiryKindPrefix(collRID, kind)
	k = binary.BigEndian.AppendUint64(k, uint64(at))
	return append(k, itemRID...)
}

// IndexPrefix prefixes a container's index entries.
func IndexPrefix(collRID []byte) []byte { return withRID(Index, collRID) }

// IndexPathPrefix is the key prefix of every index entry of one property
// path.
func IndexPathPrefix(collRID []byte, path string) []byte {
	return AppendIndexPathPrefix(make([]byte, 0, 1+8+binary.MaxVarintLen32+len(path)+16), collRID, path)
}

// AppendIndexPathPrefix appends IndexPathPrefix(collRID, path) to k.
func AppendIndexPathPrefix[S ~string | ~[]byte](k, collRID []byte, path S) []byte {
	k = append(k, Index)
	k = append(k, collRID...)
	k = binary.AppendUvarint(k, uint64(len(path)))
	return append(k, path...)
}

// SpatialIndexPathPrefix is the key prefix of every spatial index entry
// of one property path: the container's index family, then a zero byte
// where a property entry has its path's length (never zero: paths start
// with '/'), so that the two kinds never share a prefix and a container's
// index prefix holds both.
func SpatialIndexPathPrefix(collRID []byte, path string) []byte {
	k := make([]byte, 0, 1+len(collRID)+1+binary.MaxVarintLen32+len(path)+24)
	k = append(k, Index)
	k = append(k, collRID...)
	k = append(k, 0)
	k = binary.AppendUvarint(k, uint64(len(path)))
	return append(k, path...)
}

// OrderPrefix prefixes a container's order keys.
func OrderPrefix(collRID []byte) []byte { return withRID(Order, collRID) }

// OrderKey is the order key of the item with RID rid in the logical
// partition whose item key prefix is partPrefix (Item<coll rid><epk><pk>).
func OrderKey(partPrefix []byte, rid uint64) []byte {
	return AppendOrderKey(make([]byte, 0, len(partPrefix)+8), partPrefix, rid)
}

// AppendOrderKey appends OrderKey(partPrefix, rid) to k.
func AppendOrderKey(k, partPrefix []byte, rid uint64) []byte {
	k = append(k, Order)
	k = append(k, partPrefix[1:]...)
	return binary.BigEndian.AppendUint64(k, rid)
}

// OrderScope is the prefix of the order keys of the items under an item
// key prefix.
func OrderScope(itemScope []byte) []byte {
	return append([]byte{Order}, itemScope[1:]...)
}

// UniquePrefix prefixes a container's unique-key entries.
func UniquePrefix(collRID []byte) []byte { return withRID(Unique, collRID) }

// UniquePartitionPrefix prefixes the unique-key entries of one logical
// partition (pkEnc its encoded partition key).
func UniquePartitionPrefix(collRID, pkEnc []byte) []byte {
	k := binary.AppendUvarint(UniquePrefix(collRID), uint64(len(pkEnc)))
	return append(k, pkEnc...)
}

// UserPrefix prefixes a database's users.
func UserPrefix(dbRID []byte) []byte { return withRID(User, dbRID) }

// UserKey is the record of one user.
func UserKey(dbRID []byte, id string) []byte { return append(UserPrefix(dbRID), id...) }

// PermissionPrefix prefixes a user's permissions.
func PermissionPrefix(userRID []byte) []byte { return withRID(Permission, userRID) }

// PrincipalRIDKey maps a user's or permission's RID to its record's key.
func PrincipalRIDKey(rid []byte) []byte { return withRID(PrincipalRID, rid) }

// EncryptionKeyPrefix prefixes a database's client encryption keys.
func EncryptionKeyPrefix(dbRID []byte) []byte { return withRID(EncryptionKey, dbRID) }

// Kinds of search index: a search index's keys start with its container's
// rid and its kind, then its path.
const (
	SearchVector   byte = 'v' // a vector index of one embedding path
	SearchFullText byte = 't' // the full-text index of one text path
	SearchMeta     byte = 'm' // the container's search meta (policy built)
	SearchChange   byte = 'c' // on a shared store: which items changed, by LSN
)

// SearchPrefix prefixes every search index key of a container.
func SearchPrefix(collRID []byte) []byte { return withRID(Search, collRID) }

// SearchMetaKey holds what the container's search indexes were built for:
// absent, they are rebuilt from the items.
func SearchMetaKey(collRID []byte) []byte { return append(SearchPrefix(collRID), SearchMeta) }

// SearchChangePrefix prefixes a container's search change records: on a
// shared store every item write records the item's key under its LSN, and
// each gateway's search indexes catch up from them.
func SearchChangePrefix(collRID []byte) []byte { return append(SearchPrefix(collRID), SearchChange) }

// SearchChangeKey is the record of a change, numbered lsn, of the item whose
// key ends with suffix (its part after ItemContainerPrefix).
func SearchChangeKey(collRID []byte, lsn uint64, suffix []byte) []byte {
	k := binary.BigEndian.AppendUint64(SearchChangePrefix(collRID), lsn)
	return append(k, suffix...)
}

// SearchChangeHorizon holds the LSN below which the change records have
// been pruned; it sorts after every record.
func SearchChangeHorizon(collRID []byte) []byte {
	return binary.BigEndian.AppendUint64(SearchChangePrefix(collRID), math.MaxUint64)
}

// SearchIndexPrefix prefixes the keyspace of one search index: kind is
// SearchVector or SearchFullText, path the property path it indexes. The
// index's own keys (package vector's and fulltext's) follow it.
func SearchIndexPrefix(collRID []byte, kind byte, path string) []byte {
	k := append(SearchPrefix(collRID), kind)
	k = binary.AppendUvarint(k, uint64(len(path)))
	return append(k, path...)
}

// IndexEntryValueStart returns where the value of an index entry (property
// or spatial) begins: after the family, the container's RID, the spatial
// marker when there is one, and the path with its length. ok is false when
// the key is too short to be an index entry.
func IndexEntryValueStart(key []byte) (start int, ok bool) {
	const base = 1 + 8
	if len(key) < base+1 || key[0] != Index {
		return 0, false
	}
	at := base
	if key[at] == 0 { // a spatial entry: the marker, then the path
		at++
	}
	n, w := binary.Uvarint(key[at:])
	if w <= 0 || n == 0 || uint64(len(key)-at-w) < n {
		return 0, false
	}
	return at + w + int(n), true
}
