package engine

import (
	"encoding/binary"
)

// Storage key layout. Keys are ordered so that what is read together is
// adjacent: the items of a container sorted by effective partition key, then
// partition key value, then id; change-feed records by container and sequence.
const (
	prefixMeta     byte = 'M' // M<name>                          → engine metadata
	prefixDatabase byte = 'B' // B<db name>                       → database record
	prefixColl     byte = 'C' // C<db rid 4><coll name>           → container record
	prefixChild    byte = 'S' // S<coll rid 8><type>0x00<id>      → script, trigger, udf
	prefixOffer    byte = 'O' // O<offer rid>                     → offer
	prefixItem     byte = 'D' // D<coll rid 8><epk><pk len 2><pk><id> → item
	prefixFeed     byte = 'F' // F<coll rid 8><lsn 8><item rid 8> → item key (latest version)
	prefixRID      byte = 'R' // R<coll rid 8><item rid 8>        → item key
	prefixVersion  byte = 'V' // V<coll rid 8><lsn 8><n 4>        → change record (all versions and deletes)
	prefixExpiry   byte = 'X' // X<coll rid 8><kind 1><time 8><item rid 8> → item key (TTL sweep index)
	// prefixIndex 'I' (index.go): I<coll rid 8><path len><path><value><item key suffix> → nothing
	// prefixOrder 'N' (order.go): N<coll rid 8><epk><pk len 2><pk><item rid 8> → item key (creation order)
)

var (
	metaSequence = []byte{prefixMeta, 's', 'e', 'q'}
	// metaIndexFormat holds the indexFormat the store's indexes are in.
	metaIndexFormat = []byte{prefixMeta, 'i', 'x', 'f'}
)

// indexRebuildKey marks a container whose index is being rebuilt for a new
// indexing policy; it is removed by the rebuild's last batch.
func indexRebuildKey(collRID []byte) []byte {
	return append([]byte{prefixMeta, 'i', 'x', 'r'}, collRID...)
}

func indexPrefix(collRID []byte) []byte {
	return append([]byte{prefixIndex}, collRID...)
}

func databaseKey(name string) []byte {
	return append([]byte{prefixDatabase}, name...)
}

func containerKey(dbRID []byte, name string) []byte {
	k := append([]byte{prefixColl}, dbRID...)
	return append(k, name...)
}

func containerPrefix(dbRID []byte) []byte {
	return append([]byte{prefixColl}, dbRID...)
}

func childPrefix(collRID []byte, kind string) []byte {
	k := append([]byte{prefixChild}, collRID...)
	k = append(k, kind...)
	return append(k, 0)
}

func childKey(collRID []byte, kind, id string) []byte {
	return append(childPrefix(collRID, kind), id...)
}

func offerKey(rid string) []byte {
	return append([]byte{prefixOffer}, rid...)
}

// itemPartitionPrefix is the key prefix of every item of one logical partition.
func itemPartitionPrefix(collRID, epk, pkEnc []byte) []byte {
	k := make([]byte, 0, 1+len(collRID)+len(epk)+2+len(pkEnc)+32)
	k = append(k, prefixItem)
	k = append(k, collRID...)
	k = append(k, epk...)
	k = binary.BigEndian.AppendUint16(k, uint16(len(pkEnc)))
	return append(k, pkEnc...)
}

// itemContainerPrefix is the key prefix of every item of a container.
func itemContainerPrefix(collRID []byte) []byte {
	return append([]byte{prefixItem}, collRID...)
}

func feedPrefix(collRID []byte) []byte {
	return append([]byte{prefixFeed}, collRID...)
}

func feedKey(collRID []byte, lsn uint64, itemRID []byte) []byte {
	k := feedPrefix(collRID)
	k = binary.BigEndian.AppendUint64(k, lsn)
	return append(k, itemRID...)
}

func ridKey(collRID, itemRID []byte) []byte {
	k := append([]byte{prefixRID}, collRID...)
	return append(k, itemRID...)
}

func ridPrefix(collRID []byte) []byte {
	return append([]byte{prefixRID}, collRID...)
}

// versionHorizonKey holds the highest sequence number whose change records
// may have been pruned. It sorts before every record (sequence numbers start
// at 1), so scans never meet it.
func versionHorizonKey(collRID []byte) []byte { return versionKey(collRID, 0, 0) }

func versionPrefix(collRID []byte) []byte {
	return append([]byte{prefixVersion}, collRID...)
}

// versionKey addresses the n-th change record a transaction with sequence
// number lsn wrote.
func versionKey(collRID []byte, lsn uint64, n uint32) []byte {
	k := versionPrefix(collRID)
	k = binary.BigEndian.AppendUint64(k, lsn)
	return binary.BigEndian.AppendUint32(k, n)
}

// Kinds of expiry index entries: items that inherit the container's
// defaultTtl are indexed by their modification time (they expire in that
// order whatever the default is), items with their own ttl by the time they
// expire.
const (
	expiryByModified byte = 0
	expiryByDeadline byte = 1
)

func expiryPrefix(collRID []byte) []byte {
	return append([]byte{prefixExpiry}, collRID...)
}

func expiryKindPrefix(collRID []byte, kind byte) []byte {
	return append(expiryPrefix(collRID), kind)
}

func expiryKey(collRID []byte, kind byte, at int64, itemRID []byte) []byte {
	k := expiryKindPrefix(collRID, kind)
	k = binary.BigEndian.AppendUint64(k, uint64(at))
	return append(k, itemRID...)
}

// User and permission records: U<db rid 4><user id> → user,
// P<user rid 8><permission id> → permission, and G<rid> → the record's key,
// to find one by RID. A user's RID starts with its database's and a
// permission's with its user's, so P<db rid 4> and G<db rid 4> prefix every
// entry of a database, G<user rid 8> every entry of a user.
const (
	prefixUser         byte = 'U'
	prefixPermission   byte = 'P'
	prefixPrincipalRID byte = 'G'
)

func principalRIDKey(rid []byte) []byte {
	return append([]byte{prefixPrincipalRID}, rid...)
}

func userPrefix(dbRID []byte) []byte {
	return append([]byte{prefixUser}, dbRID...)
}

func permissionPrefix(userRID []byte) []byte {
	return append([]byte{prefixPermission}, userRID...)
}
