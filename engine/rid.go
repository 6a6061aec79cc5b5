package engine

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"strings"
)

// RIDs are base64 of a byte string that embeds the parent's RID, with '-' in
// place of '/': a database 4 bytes, a container 8 (database + 4), an item or
// script 16 (container + 8).

func encodeRID(b []byte) string {
	return strings.ReplaceAll(base64.StdEncoding.EncodeToString(b), "/", "-")
}

// appendRID appends encodeRID(b).
func appendRID(dst, b []byte) []byte {
	n := len(dst)
	dst = base64.StdEncoding.AppendEncode(dst, b)
	for i := n; i < len(dst); i++ {
		if dst[i] == '/' {
			dst[i] = '-'
		}
	}
	return dst
}

// decodeRID decodes a RID; ok is false when s is not a RID of n bytes.
func decodeRID(s string, n int) ([]byte, bool) {
	b, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(s, "-", "/"))
	if err != nil || len(b) != n {
		return nil, false
	}
	return b, true
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("engine: crypto/rand failed: " + err.Error())
	}
	return b
}

// childRID is the RID of an item or script: its container's RID and a unique suffix.
func childRID(collRID []byte, suffix uint64) []byte {
	b := make([]byte, 0, 16)
	b = append(b, collRID...)
	return binary.BigEndian.AppendUint64(b, suffix)
}
