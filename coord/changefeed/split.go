package changefeed

import (
	"encoding/json"
	"maps"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// feedToken is the Go SDK's change feed continuation: the container's
// resource id and, per physical range the feed walks, that range's
// position. The processor writes one range per lease; after a split the
// SDK hands back one entry per child, each at its own position.
type feedToken struct {
	Version      int          `json:"version,omitempty"`
	ResourceID   string       `json:"resourceId"`
	Continuation []tokenRange `json:"continuation"`
}

type tokenRange struct {
	Min   string  `json:"minInclusive"`
	Max   string  `json:"maxExclusive"`
	Token *string `json:"continuationToken,omitempty"`
}

// encodeToken is the continuation for reading one range from etag.
func encodeToken(rid string, r azcosmos.FeedRange, etag string) string {
	t := feedToken{Version: 1, ResourceID: rid, Continuation: []tokenRange{{Min: r.MinInclusive, Max: r.MaxExclusive, Token: &etag}}}
	b, _ := json.Marshal(t)
	return string(b)
}

func decodeToken(s string) (feedToken, bool) {
	var t feedToken
	if s == "" || json.Unmarshal([]byte(s), &t) != nil || len(t.Continuation) == 0 {
		return feedToken{}, false
	}
	return t, true
}

// normMax is a range's exclusive maximum, with "" meaning the end ("FF").
func normMax(m string) string {
	if m == "" {
		return "FF"
	}
	return m
}

// epkLess orders effective partition keys: upper-case hex strings compare as
// the bytes they encode.
func epkLess(a, b string) bool { return strings.ToUpper(a) < strings.ToUpper(b) }

// sameRange reports whether two ranges are equal.
func sameRange(a, b azcosmos.FeedRange) bool {
	return strings.EqualFold(a.MinInclusive, b.MinInclusive) && strings.EqualFold(normMax(a.MaxExclusive), normMax(b.MaxExclusive))
}

// clampTo returns the parts of ranges that lie inside parent, in order.
func clampTo(parent azcosmos.FeedRange, ranges []azcosmos.FeedRange) []azcosmos.FeedRange {
	var out []azcosmos.FeedRange
	pmax := normMax(parent.MaxExclusive)
	for _, r := range ranges {
		lo, hi := r.MinInclusive, normMax(r.MaxExclusive)
		if epkLess(lo, parent.MinInclusive) {
			lo = parent.MinInclusive
		}
		if epkLess(pmax, hi) {
			hi = pmax
		}
		if !epkLess(lo, hi) {
			continue
		}
		out = append(out, azcosmos.FeedRange{MinInclusive: lo, MaxExclusive: hi})
	}
	return out
}

// childRange is a child of a split lease and where its feed resumes.
type childRange struct {
	Range        azcosmos.FeedRange
	Continuation string
}

// splitFromToken returns the children of a lease over parent when the SDK's
// continuation t walks more than that one range (the range split during the
// read), each with its own position; nil when t still names parent alone.
func splitFromToken(parent azcosmos.FeedRange, parentCont string, t feedToken) []childRange {
	if len(t.Continuation) == 1 {
		only := t.Continuation[0]
		if sameRange(parent, azcosmos.FeedRange{MinInclusive: only.Min, MaxExclusive: only.Max}) {
			return nil
		}
	}
	out := make([]childRange, 0, len(t.Continuation))
	for _, e := range t.Continuation {
		c := childRange{Range: azcosmos.FeedRange{MinInclusive: e.Min, MaxExclusive: e.Max}, Continuation: parentCont}
		if e.Token != nil {
			c.Continuation = *e.Token
		}
		out = append(out, c)
	}
	sortChildren(out)
	return out
}

// splitFromRanges returns the children of a lease over parent from the
// container's current feed ranges (after the service answered 410/1002 for
// it), each resuming from the parent's continuation; nil when parent is
// still one range.
func splitFromRanges(parent azcosmos.FeedRange, parentCont string, current []azcosmos.FeedRange) []childRange {
	parts := clampTo(parent, current)
	if len(parts) == 0 || (len(parts) == 1 && sameRange(parts[0], parent)) {
		return nil
	}
	out := make([]childRange, 0, len(parts))
	for _, r := range parts {
		out = append(out, childRange{Range: r, Continuation: parentCont})
	}
	sortChildren(out)
	return out
}

func sortChildren(c []childRange) {
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && epkLess(c[j].Range.MinInclusive, c[j-1].Range.MinInclusive); j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
}

// leaseToken is the version-1 lease token of a range, min + "-" + max.
func leaseToken(r azcosmos.FeedRange) string { return r.MinInclusive + "-" + r.MaxExclusive }

// newLease is a version-1 lease over r.
func (s *store) newLease(r azcosmos.FeedRange, cont, owner string, props map[string]string) *Lease {
	id := s.leaseID(leaseToken(r))
	if props == nil {
		props = map[string]string{}
	}
	return &Lease{ID: id, PartitionKey: id, Version: leaseVersionEPK, LeaseToken: leaseToken(r),
		FeedRange: newLeaseRange(r), Owner: owner, ContinuationToken: cont,
		Properties: maps.Clone(props), Mode: s.mode.leaseMode()}
}
