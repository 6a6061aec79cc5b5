package rids

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"strings"
)

// encoding is base64's standard encoding, padding included, with '-' in
// place of '/': a RID's characters written in one pass, not turned after.
var encoding = base64.NewEncoding("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+-")

// Encode is the RID string of b: its base64, with '-' in place of '/'.
func Encode(b []byte) string {
	return encoding.EncodeToString(b)
}

// Append appends Encode(b) to dst.
func Append(dst, b []byte) []byte {
	return encoding.AppendEncode(dst, b)
}

// Decode decodes a RID; ok is false when s is not a RID of n bytes.
func Decode(s string, n int) ([]byte, bool) {
	b, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(s, "-", "/"))
	if err != nil || len(b) != n {
		return nil, false
	}
	return b, true
}

// Random is a new RID: parent's bytes followed by n random bytes, in a slice
// of its own. The caller checks that no resource holds it yet.
func Random(parent []byte, n int) []byte {
	b := make([]byte, len(parent)+n)
	copy(b, parent)
	if _, err := rand.Read(b[len(parent):]); err != nil {
		panic("rids: crypto/rand failed: " + err.Error())
	}
	return b
}

// Child is the RID of an item, a script or a permission: its parent's RID
// (a container's or a user's, 8 bytes) and a unique suffix, big-endian so
// that children sort by it.
func Child(parent []byte, suffix uint64) []byte {
	b := make([]byte, 0, len(parent)+8)
	b = append(b, parent...)
	return binary.BigEndian.AppendUint64(b, suffix)
}
