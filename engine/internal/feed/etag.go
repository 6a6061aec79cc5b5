package feed

import (
	"strconv"
	"strings"
)

// FormatETag renders a change feed position, the sequence number up to
// which a page covers the feed, as its ETag.
func FormatETag(lsn uint64) string { return `"` + strconv.FormatUint(lsn, 10) + `"` }

// ParseETag reads a continuation ETag (quoted, weak or bare decimal); false
// when s is none.
func ParseETag(s string) (uint64, bool) {
	v := strings.TrimPrefix(strings.TrimSpace(s), "W/")
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}
