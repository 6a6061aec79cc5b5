package changefeed

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord/internal/status"
)

// leaseVersionEPK marks a lease over an effective-partition-key range (the
// .NET processor's version 1); version 0 leases name a partition key range.
const leaseVersionEPK = 1

// Lease is one lease document, in the shape the .NET change feed processor
// writes (version 1, "EPK" leases) so that .NET and Java processors, and the
// tools that read their lease containers, understand it. Unknown properties
// of a lease written by another processor are kept on rewrite.
type Lease struct {
	// ID is the document id: the store's prefix, "..", and LeaseToken.
	ID string `json:"id"`
	// PartitionKey repeats ID, for lease containers partitioned by
	// /partitionKey; containers partitioned by /id ignore it.
	PartitionKey string `json:"partitionKey,omitempty"`
	// Version is 1 for a lease over an effective partition key range, 0 (or
	// absent) for a lease over a partition key range id.
	Version int `json:"version"`
	// ETag is the document's _etag, sent as If-Match on every write.
	ETag azcore.ETag `json:"_etag,omitempty"`
	// LeaseToken names the range: min + "-" + max for version 1.
	LeaseToken string `json:"LeaseToken"`
	// FeedRange is the range the lease covers.
	FeedRange *LeaseRange `json:"FeedRange,omitempty"`
	// Owner is the instance holding the lease, or empty when released.
	Owner string `json:"-"`
	// ContinuationToken is the change feed ETag to resume from ("" when the
	// lease has never been checkpointed).
	ContinuationToken string `json:"-"`
	// Properties are user properties, copied to child leases on a split.
	Properties map[string]string `json:"properties"`
	// Timestamp is when the lease was last written (UTC).
	Timestamp time.Time `json:"-"`
	// Mode is the change feed mode: "Incremental Feed" or, for
	// AllVersionsAndDeletes, "Full-Fidelity Feed".
	Mode string `json:"Mode,omitempty"`

	// extra holds the properties this package does not model.
	extra map[string]json.RawMessage
}

// LeaseRange is a lease's feed range in the .NET serialization,
// {"Range":{"min":"","max":"FF"}}.
type LeaseRange struct {
	Range struct {
		Min string `json:"min"`
		Max string `json:"max"`
	} `json:"Range"`
}

func newLeaseRange(r azcosmos.FeedRange) *LeaseRange {
	lr := &LeaseRange{}
	lr.Range.Min, lr.Range.Max = r.MinInclusive, r.MaxExclusive
	return lr
}

// Range returns the lease's feed range.
func (l *Lease) Range() (azcosmos.FeedRange, bool) {
	if l.FeedRange == nil {
		return azcosmos.FeedRange{}, false
	}
	return azcosmos.FeedRange{MinInclusive: l.FeedRange.Range.Min, MaxExclusive: l.FeedRange.Range.Max}, true
}

// known lists the properties Lease models; everything else goes to extra.
var known = map[string]bool{"id": true, "partitionKey": true, "version": true, "_etag": true,
	"LeaseToken": true, "FeedRange": true, "Owner": true, "ContinuationToken": true,
	"properties": true, "timestamp": true, "Mode": true,
	"_rid": true, "_self": true, "_ts": true, "_attachments": true, "_lsn": true}

// MarshalJSON writes the lease as the .NET processor does: a null Owner when
// released, an ISO-8601 timestamp, and the properties it did not model.
func (l Lease) MarshalJSON() ([]byte, error) {
	type plain Lease
	if l.Properties == nil {
		l.Properties = map[string]string{} // .NET reads an object, never null
	}
	b, err := json.Marshal(plain(l))
	if err != nil {
		return nil, err
	}
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range l.extra {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	m["Owner"] = json.RawMessage("null")
	if l.Owner != "" {
		m["Owner"], _ = json.Marshal(l.Owner)
	}
	m["ContinuationToken"] = json.RawMessage("null")
	if l.ContinuationToken != "" {
		m["ContinuationToken"], _ = json.Marshal(l.ContinuationToken)
	}
	m["timestamp"], _ = json.Marshal(l.Timestamp.UTC().Format("2006-01-02T15:04:05.0000000Z"))
	delete(m, "_etag")
	return json.Marshal(m)
}

// UnmarshalJSON reads a lease written by this package, the .NET processor or
// the Java processor (whose latest-version leases name the range "feedRange"
// and keep the continuation as a base64 JSON state).
func (l *Lease) UnmarshalJSON(b []byte) error {
	type plain Lease
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*l = Lease(p)
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	var owner, cont, ts *string
	_ = json.Unmarshal(m["Owner"], &owner)
	_ = json.Unmarshal(m["ContinuationToken"], &cont)
	_ = json.Unmarshal(m["timestamp"], &ts)
	if owner != nil {
		l.Owner = *owner
	}
	if cont != nil {
		l.ContinuationToken = decodeContinuation(*cont)
	}
	if ts != nil {
		l.Timestamp, _ = time.Parse(time.RFC3339Nano, *ts)
	}
	if l.Timestamp.IsZero() {
		var sec int64
		if json.Unmarshal(m["_ts"], &sec) == nil && sec > 0 {
			l.Timestamp = time.Unix(sec, 0)
		}
	}
	if l.FeedRange == nil {
		if raw, ok := m["feedRange"]; ok {
			var fr LeaseRange
			if json.Unmarshal(raw, &fr) == nil {
				l.FeedRange = &fr
			}
		}
	}
	for k, v := range m {
		if !known[k] {
			if l.extra == nil {
				l.extra = map[string]json.RawMessage{}
			}
			l.extra[k] = v
		}
	}
	return nil
}

// decodeContinuation returns the change feed ETag of a lease continuation:
// the raw ETag (.NET, Java pk-range leases), or the single range's token
// inside a Java base64 JSON change feed state.
func decodeContinuation(s string) string {
	if s == "" || strings.HasPrefix(s, `"`) {
		return s
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(s)
		if err != nil {
			continue
		}
		var st struct {
			Continuation struct {
				Continuation []struct {
					Token string `json:"token"`
				} `json:"Continuation"`
			} `json:"Continuation"`
		}
		if json.Unmarshal(b, &st) == nil && len(st.Continuation.Continuation) == 1 {
			return st.Continuation.Continuation[0].Token
		}
	}
	return s
}

// ErrLeaseLost reports that a lease is no longer this instance's: another
// took it over, or it was deleted (a split replaced it).
var ErrLeaseLost = errors.New("changefeed: lease lost")

// store reads and writes one processor's lease documents.
type store struct {
	c      *azcosmos.ContainerClient
	prefix string
	mode   Mode
}

// statusOf is the HTTP status of a response error, 0 for other errors
// (404/1002 counts as 503: see coord/internal/status).
func statusOf(err error) int { return status.Of(err) }

func (s *store) pk(id string) azcosmos.PartitionKey { return azcosmos.NewPartitionKeyString(id) }

// leaseID is the id of the lease with the given token.
func (s *store) leaseID(token string) string { return s.prefix + ".." + token }

// list returns every lease of the store.
func (s *store) list(ctx context.Context) ([]*Lease, error) {
	q := "SELECT * FROM c WHERE STARTSWITH(c.id, @p)"
	pager := s.c.NewQueryItemsPager(q, azcosmos.NewPartitionKey(), &azcosmos.QueryOptions{
		QueryParameters: []azcosmos.QueryParameter{{Name: "@p", Value: s.prefix + ".."}}})
	var out []*Lease
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("changefeed: listing leases: %w", err)
		}
		for _, it := range page.Items {
			l := &Lease{}
			if err := json.Unmarshal(it, l); err != nil {
				return nil, fmt.Errorf("changefeed: reading lease: %w", err)
			}
			out = append(out, l)
		}
	}
	return out, nil
}

// create writes a new lease; it reports false when one with the id exists.
func (s *store) create(ctx context.Context, l *Lease) (bool, error) {
	l.Timestamp = time.Now()
	b, err := json.Marshal(l)
	if err != nil {
		return false, err
	}
	resp, err := s.c.CreateItem(ctx, s.pk(l.ID), b, nil)
	if statusOf(err) == http.StatusConflict {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("changefeed: creating lease %s: %w", l.ID, err)
	}
	l.ETag = resp.ETag
	return true, nil
}

// read returns the stored lease, or ErrLeaseLost when it is gone.
func (s *store) read(ctx context.Context, id string) (*Lease, error) {
	resp, err := s.c.ReadItem(ctx, s.pk(id), id, nil)
	if statusOf(err) == http.StatusNotFound {
		return nil, ErrLeaseLost
	}
	if err != nil {
		return nil, fmt.Errorf("changefeed: reading lease %s: %w", id, err)
	}
	l := &Lease{}
	if err := json.Unmarshal(resp.Value, l); err != nil {
		return nil, err
	}
	return l, nil
}

// replace writes l if the stored copy still has l.ETag, and takes the new
// ETag. It reports false on a precondition failure.
func (s *store) replace(ctx context.Context, l *Lease) (bool, error) {
	l.Timestamp = time.Now()
	b, err := json.Marshal(l)
	if err != nil {
		return false, err
	}
	resp, err := s.c.ReplaceItem(ctx, s.pk(l.ID), l.ID, b, &azcosmos.ItemOptions{IfMatchEtag: &l.ETag})
	switch statusOf(err) {
	case 0:
	case http.StatusPreconditionFailed:
		return false, nil
	case http.StatusNotFound, http.StatusConflict:
		return false, ErrLeaseLost
	default:
		return false, fmt.Errorf("changefeed: writing lease %s: %w", l.ID, err)
	}
	if err != nil {
		return false, fmt.Errorf("changefeed: writing lease %s: %w", l.ID, err)
	}
	l.ETag = resp.ETag
	return true, nil
}

// update applies mutate to the lease and writes it with If-Match; on a
// precondition failure it re-reads the stored copy, and applies mutate to it
// while check accepts it. It returns the written lease, or ErrLeaseLost.
func (s *store) update(ctx context.Context, l *Lease, check func(*Lease) bool, mutate func(*Lease)) (*Lease, error) {
	cur := *l
	for range 6 {
		if !check(&cur) {
			return nil, ErrLeaseLost
		}
		next := cur
		mutate(&next)
		ok, err := s.replace(ctx, &next)
		if err != nil {
			return nil, err
		}
		if ok {
			return &next, nil
		}
		fresh, err := s.read(ctx, cur.ID)
		if err != nil {
			return nil, err
		}
		cur = *fresh
	}
	return nil, ErrLeaseLost
}

// remove deletes the lease if it still has l.ETag.
func (s *store) remove(ctx context.Context, l *Lease) error {
	_, err := s.c.DeleteItem(ctx, s.pk(l.ID), l.ID, &azcosmos.ItemOptions{IfMatchEtag: &l.ETag})
	switch statusOf(err) {
	case 0, http.StatusNotFound:
		return nil
	case http.StatusPreconditionFailed:
		return ErrLeaseLost
	}
	return fmt.Errorf("changefeed: deleting lease %s: %w", l.ID, err)
}

// leasePrefix is the .NET processor's prefix: the processor name, the
// account host, and the database and container resource ids (the
// database's taken from the container's).
func leasePrefix(name, host, containerRID string) string {
	return name + host + "_" + databaseRID(containerRID) + "_" + containerRID
}

// databaseRID is the database part of a container's resource id: its first
// four bytes.
func databaseRID(containerRID string) string {
	b, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(containerRID, "-", "/"))
	if err != nil || len(b) < 4 {
		return containerRID
	}
	return strings.ReplaceAll(base64.StdEncoding.EncodeToString(b[:4]), "/", "-")
}

// LeasePartitionKeyPath is the partition key path a lease container should
// have: the .NET processor accepts /id or /partitionKey, the Java one /id
// only, so a container shared across languages needs /id.
const LeasePartitionKeyPath = "/id"

// CreateLeaseContainer creates a lease container fit for New (and for .NET
// and Java processors sharing it) in db if it does not exist, and returns
// it. Processors of different names, and the outbox relay, may share one.
func CreateLeaseContainer(ctx context.Context, db *azcosmos.DatabaseClient, id string) (*azcosmos.ContainerClient, error) {
	_, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{
		ID:                     id,
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{LeasePartitionKeyPath}},
	}, nil)
	if err != nil && statusOf(err) != http.StatusConflict {
		return nil, fmt.Errorf("changefeed: creating lease container %q: %w", id, err)
	}
	return db.NewContainer(id)
}
