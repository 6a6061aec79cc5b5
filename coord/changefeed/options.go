package changefeed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// Mode is the change feed mode a processor reads.
type Mode int

const (
	// LatestVersion delivers each changed item once, as its latest
	// version; deletes are not seen. The default.
	LatestVersion Mode = iota
	// AllVersionsAndDeletes delivers every create, replace and delete,
	// each with its metadata (Batch.Versions decodes them). The monitored
	// container needs a changeFeedPolicy with a retentionDuration, and a
	// lease with no checkpoint starts from now: the service offers no
	// other start in this mode.
	AllVersionsAndDeletes
)

// leaseMode is the mode's name in lease documents, as the .NET processor
// writes it.
func (m Mode) leaseMode() string {
	if m == AllVersionsAndDeletes {
		return "Full-Fidelity Feed"
	}
	return "Incremental Feed"
}

// String names the mode.
func (m Mode) String() string {
	if m == AllVersionsAndDeletes {
		return "all versions and deletes"
	}
	return "latest version"
}

// StartFrom says where a lease with no checkpoint starts reading.
type StartFrom struct {
	kind startKind
	at   time.Time
}

type startKind int

const (
	startDefault startKind = iota
	startBeginning
	startNow
	startTime
)

// StartFromBeginning reads every change the container still has. It is
// the default in LatestVersion mode.
func StartFromBeginning() StartFrom { return StartFrom{kind: startBeginning} }

// StartFromNow reads changes made after the leases were created. It is
// the only start (and the default) in AllVersionsAndDeletes mode.
func StartFromNow() StartFrom { return StartFrom{kind: startNow} }

// StartFromTime reads changes made at or after t (one-second resolution).
func StartFromTime(t time.Time) StartFrom { return StartFrom{kind: startTime, at: t} }

func (s StartFrom) now(m Mode) bool {
	return s.kind == startNow || (s.kind == startDefault && m == AllVersionsAndDeletes)
}

// Options configure a processor. The zero value (or nil) takes the .NET
// processor's defaults.
type Options struct {
	// Host is the account endpoint's host as it appears in lease ids. By
	// default it is derived from the client's endpoint as the .NET
	// processor derives it (the host name, lower case, without the port),
	// so .NET and Go instances of one processor configured with the same
	// endpoint share one set of leases. Set it only to share the leases of
	// a fleet configured with another endpoint (a regional or private
	// one).
	Host string
	// Instance names this instance in lease Owner fields; default the host
	// name, process id and a random suffix.
	Instance string
	// Mode is the change feed mode; default LatestVersion.
	Mode Mode
	// StartFrom applies to leases that have no checkpoint.
	StartFrom StartFrom
	// ManualCheckpoint, when true, leaves checkpoints to the handler: a
	// lease's position advances only when a Batch's Checkpoint is called,
	// while the processor goes on reading the batches after it. A handler
	// error, or the lease moving to another instance, resumes from the
	// last checkpoint.
	ManualCheckpoint bool
	// MaxItems is the page size of feed reads; default 100.
	MaxItems int32
	// PollInterval is the wait after a read found nothing new; default 5 s.
	PollInterval time.Duration
	// AcquireInterval is how often leases are balanced; default 13 s.
	AcquireInterval time.Duration
	// RenewInterval is how often held leases are renewed; default 17 s.
	RenewInterval time.Duration
	// Expiration is how long a lease may go unrenewed before another
	// instance takes it; default 60 s.
	Expiration time.Duration
	// Metrics, when set, receive the processor's measures; LagInterval
	// (default 30 s) is then how often the lag of held leases is estimated.
	Metrics     *Metrics
	LagInterval time.Duration
	// OnLeaseAcquired, when set, is told when this instance starts
	// processing a lease (by its lease token): acquired at balancing, or a
	// child created from a split.
	OnLeaseAcquired func(lease string)
	// OnLeaseReleased, when set, is told when this instance stops
	// processing a lease: released because Run is returning, taken over by
	// another instance, or replaced by its children after a split.
	OnLeaseReleased func(lease string)
	// OnError, when set, is told of the errors the processor recovers from
	// by retrying: failed lease listings and acquisitions (lease ""),
	// failed reads, handler errors and failed checkpoints (lease token).
	OnError func(lease string, err error)
}

func (o *Options) defaults() error {
	if o.Instance == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.Instance = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.Mode == AllVersionsAndDeletes && (o.StartFrom.kind == startBeginning || o.StartFrom.kind == startTime) {
		return errors.New("changefeed: the all versions and deletes mode starts from now only (the service offers no other start)")
	}
	if o.MaxItems <= 0 {
		o.MaxItems = 100
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.PollInterval, 5*time.Second)
	def(&o.AcquireInterval, 13*time.Second)
	def(&o.RenewInterval, 17*time.Second)
	def(&o.Expiration, 60*time.Second)
	def(&o.LagInterval, 30*time.Second)
	return nil
}

// HostOf is the host an endpoint contributes to lease ids, derived as the
// .NET processor derives it (System.Uri.Host of the client's endpoint):
// the host name in lower case, without scheme, port or path; an IPv6
// address keeps its brackets.
func HostOf(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("changefeed: endpoint %q has no host", endpoint)
	}
	h := strings.ToLower(u.Hostname())
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	return h, nil
}

// feed reads one container's change feed in one mode.
type feed struct {
	monitored *azcosmos.ContainerClient
	rid       string
	mode      Mode
	from      StartFrom
}

// ctx is the context of a feed read: in AllVersionsAndDeletes mode it
// carries the headers that ask the service for that mode (the SDK reads the
// latest-version feed unless told otherwise).
func (f *feed) ctx(ctx context.Context) context.Context {
	if f.mode != AllVersionsAndDeletes {
		return ctx
	}
	return policy.WithHTTPHeader(ctx, http.Header{
		"A-IM": {"Full-Fidelity Feed"},
		"x-ms-cosmos-changefeed-wire-format-version": {"2021-09-15"},
	})
}

// read reads one page of range r from continuation cont (the lease's
// position; "" for a lease never checkpointed, which starts from f.from).
func (f *feed) read(ctx context.Context, r azcosmos.FeedRange, cont string, maxItems int32) (azcosmos.ChangeFeedResponse, error) {
	return f.monitored.ReadChangeFeed(f.ctx(ctx), f.options(r, cont, maxItems))
}

// options are the read options for range r at continuation cont.
func (f *feed) options(r azcosmos.FeedRange, cont string, maxItems int32) *azcosmos.ChangeFeedOptions {
	o := &azcosmos.ChangeFeedOptions{MaxItemCount: maxItems, FeedRange: &r}
	switch {
	case cont != "":
		t := encodeToken(f.rid, r, cont)
		o.Continuation = &t
	case f.from.now(f.mode):
		t := encodeToken(f.rid, r, "*")
		o.Continuation = &t
	case f.from.kind == startTime:
		at := f.from.at
		o.StartFrom = &at
	}
	return o
}

// prefixOf reads the monitored container and returns its resource id and
// the .NET lease prefix for a processor name and host: the name, the host,
// and the database and container resource ids.
func prefixOf(ctx context.Context, monitored *azcosmos.ContainerClient, name, host string) (rid, prefix string, err error) {
	props, err := monitored.Read(ctx, nil)
	if err != nil {
		return "", "", fmt.Errorf("changefeed: reading the monitored container: %w", err)
	}
	p := props.ContainerProperties
	return p.ResourceID, name + host + "_" + databaseRIDOf(p.SelfLink, p.ResourceID) + "_" + p.ResourceID, nil
}

// databaseRIDOf is the database's resource id from a container's self link
// ("dbs/<db rid>/colls/<coll rid>/"), as the .NET processor reads the
// database's; failing that, from the container's resource id, whose first
// four bytes are the database's.
func databaseRIDOf(selfLink, containerRID string) string {
	parts := strings.Split(strings.Trim(selfLink, "/"), "/")
	if len(parts) >= 2 && parts[0] == "dbs" && parts[1] != "" {
		return parts[1]
	}
	return databaseRID(containerRID)
}
