package lock

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord/internal/status"
)

// PartitionKeyPath is the partition key path a lock container must have.
const PartitionKeyPath = "/pk"

// Lease is one holder's claim on a named lock, as last written to the
// database.
type Lease struct {
	// Name is the lock's name.
	Name string
	// Owner identifies the holder: the caller's owner name followed by a
	// random suffix unique to this acquisition, so a holder recognizes its
	// own write even when the reply to it was lost.
	Owner string
	// Token is the fencing token of this acquisition: strictly greater than
	// the token of every earlier acquisition of the same name.
	Token int64
	// ExpiresAt is when the database will expire the lease unless it is
	// renewed, computed from the server's timestamp of the last write and
	// the time to live (whole seconds, as the service counts them). The
	// service may expire it up to a second earlier than this, since its
	// timestamps are truncated to seconds.
	ExpiresAt time.Time
	// ETag is the ETag of the lease document's last write by this holder;
	// renewals and the release are conditional on it.
	ETag azcore.ETag
}

// HeldError is the lock held by another owner: what TryAcquire returns,
// and what Acquire returns (with its context's error) when it gives up
// waiting. errors.Is(err, ErrHeld) holds for it.
type HeldError struct {
	// Holder is the lease that was in the way, as last read.
	Holder Lease
}

// Error names the lock and its holder.
func (e *HeldError) Error() string {
	return fmt.Sprintf("lock: %q is held by %s (token %d, expires %s)", e.Holder.Name, e.Holder.Owner, e.Holder.Token,
		e.Holder.ExpiresAt.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

var (
	// ErrHeld means another owner holds the lock; the error that carries it
	// is a *HeldError naming the holder, except when the lock was contended
	// too hard to tell who won.
	ErrHeld = errors.New("lock: held by another owner")
	// ErrLost means the lock is no longer held by this handle: it was
	// taken over, expired, or could not be renewed in time.
	ErrLost = errors.New("lock: lost")
	// ErrReleased means the handle was released.
	ErrReleased = errors.New("lock: released")
	// errContended means another acquirer advanced the fencing counter
	// between our read and our write; the caller retries.
	errContended = errors.New("lock: contended")
)

// Options tune an acquisition. The zero value is usable.
type Options struct {
	// TTL is the lease's time to live, a whole number of seconds of at
	// least 2 (the service counts time to live from its write timestamp,
	// which it truncates to the second). Default 10 s.
	TTL time.Duration
	// Owner names the holder in the lease document, for people reading it;
	// a random suffix unique to the acquisition is appended. Default
	// host:pid.
	Owner string
	// RenewEvery is how often the lease is renewed while held. Default a
	// third of (TTL - 1 s).
	RenewEvery time.Duration
	// MinBackoff and MaxBackoff bound Acquire's exponential backoff with
	// full jitter between attempts. Defaults 10 ms and 1 s.
	MinBackoff, MaxBackoff time.Duration
}

func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.TTL == 0 {
		r.TTL = 10 * time.Second
	}
	if r.TTL < 2*time.Second || r.TTL%time.Second != 0 {
		return r, fmt.Errorf("lock: TTL %v must be a whole number of seconds, at least 2", r.TTL)
	}
	if r.Owner == "" {
		host, _ := os.Hostname()
		r.Owner = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if r.RenewEvery <= 0 {
		r.RenewEvery = (r.TTL - time.Second) / 3
	}
	if r.MinBackoff <= 0 {
		r.MinBackoff = 10 * time.Millisecond
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = time.Second
	}
	if r.MaxBackoff < r.MinBackoff {
		r.MaxBackoff = r.MinBackoff
	}
	return r, nil
}

// safeTTL is how long after sending a write the lease is surely still held:
// the service truncates the write's timestamp to the second, so it may
// expire the lease up to a second before TTL has passed.
func (o *Options) safeTTL() time.Duration { return o.TTL - time.Second }

// Locker grants locks stored in one container.
type Locker struct {
	c *azcosmos.ContainerClient
}

// New returns a Locker over c, a container whose partition key path is
// PartitionKeyPath and that has time to live enabled (CreateContainer makes
// one).
func New(c *azcosmos.ContainerClient) *Locker { return &Locker{c: c} }

// CreateContainer creates a lock container fit for New in db (partition key
// PartitionKeyPath, time to live on without a default expiry, so the
// fencing counters never expire) if it does not exist, and returns it.
func CreateContainer(ctx context.Context, db *azcosmos.DatabaseClient, id string) (*azcosmos.ContainerClient, error) {
	never := int32(-1)
	_, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{
		ID:                     id,
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{PartitionKeyPath}},
		DefaultTimeToLive:      &never,
	}, nil)
	if err != nil && statusOf(err) != http.StatusConflict {
		return nil, fmt.Errorf("lock: creating container %q: %w", id, err)
	}
	return db.NewContainer(id)
}

// leaseDoc is the lease document: id and partition key are the lock's name.
type leaseDoc struct {
	ID    string `json:"id"`
	PK    string `json:"pk"`
	Owner string `json:"owner"`
	Token int64  `json:"token"`
	TTL   int    `json:"ttl"`
	TS    int64  `json:"_ts,omitempty"`
}

// fenceDoc is the fencing counter of a name: same partition, no TTL.
type fenceDoc struct {
	ID    string `json:"id"`
	PK    string `json:"pk"`
	Token int64  `json:"token"`
	TTL   int    `json:"ttl"` // -1: never expires
}

func fenceID(name string) string { return name + ".fence" }

func checkName(name string) error {
	bad := name == "" || strings.ContainsAny(name, `/\?#'"`)
	for _, r := range name {
		bad = bad || r < ' ' || r == 0x7f
	}
	if bad {
		return fmt.Errorf(`lock: invalid name %q: it must be non-empty and hold none of / \ ? # ' " nor control characters`, name)
	}
	return nil
}

// TryAcquire takes the lock if it is free and returns a *HeldError (ErrHeld)
// naming the holder if it is not. It does not wait, except to settle an
// ambiguous outcome of its own write.
func (l *Locker) TryAcquire(ctx context.Context, name string, opts *Options) (*Lock, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	owner := o.Owner + "/" + nonce()
	for range 5 {
		h, err := l.attempt(ctx, name, owner, &o)
		if errors.Is(err, errContended) {
			// Someone advanced the counter since we read it: a fresh
			// attempt sees who holds the lock now.
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		return h, err
	}
	return nil, fmt.Errorf("%w: %q is contended", ErrHeld, name)
}

// Acquire takes the lock, waiting with exponential backoff and full jitter
// while another owner holds it, until it is held or ctx ends. When ctx ends
// first, the error wraps ctx's error and, if the lock was held by another
// owner at the last attempt, the *HeldError naming that holder (so both
// errors.Is(err, context.DeadlineExceeded) and errors.Is(err, ErrHeld)
// hold).
func (l *Locker) Acquire(ctx context.Context, name string, opts *Options) (*Lock, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	owner := o.Owner + "/" + nonce()
	ceiling := o.MinBackoff
	var last error // why the last attempt did not take the lock
	gaveUp := func() error {
		var held *HeldError
		if errors.As(last, &held) {
			return fmt.Errorf("lock: acquiring %q: %w; %w", name, ctx.Err(), held)
		}
		if last != nil && !errors.Is(last, ctx.Err()) {
			return fmt.Errorf("lock: acquiring %q: %w (last attempt: %v)", name, ctx.Err(), last)
		}
		return fmt.Errorf("lock: acquiring %q: %w", name, ctx.Err())
	}
	for {
		h, err := l.attempt(ctx, name, owner, &o)
		if err == nil {
			return h, nil
		}
		if ctx.Err() != nil {
			return nil, gaveUp()
		}
		if !retryable(err) {
			return nil, err
		}
		if !errors.Is(err, errContended) || last == nil {
			last = err
		}
		// Full jitter: a uniform wait below an exponentially growing
		// ceiling, so waiters spread out instead of stampeding together.
		wait := time.Duration(rand.Int64N(int64(ceiling) + 1))
		if ceiling < o.MaxBackoff {
			ceiling = min(2*ceiling, o.MaxBackoff)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, gaveUp()
		case <-t.C:
		}
	}
}

// attempt makes one try at taking the lock for owner.
func (l *Locker) attempt(ctx context.Context, name, owner string, o *Options) (*Lock, error) {
	pk := azcosmos.NewPartitionKeyString(name)
	// The counter is read before the lease: any acquisition after this
	// read changes the counter's ETag and fails our batch, and any lease
	// granted before it is seen by the lease read below.
	var fence fenceDoc
	var fenceETag *azcore.ETag
	if r, err := l.c.ReadItem(ctx, pk, fenceID(name), nil); err == nil {
		if err := json.Unmarshal(r.Value, &fence); err != nil {
			return nil, fmt.Errorf("lock: decoding fencing counter of %q: %w", name, err)
		}
		e := r.ETag
		fenceETag = &e
	} else if statusOf(err) != http.StatusNotFound {
		return nil, err
	}
	cur, etag, err := l.readLease(ctx, name)
	if err != nil {
		return nil, err
	}
	if cur != nil {
		if cur.Owner == owner {
			// Our own write of an earlier attempt applied though its reply
			// was lost. When it was sent is unknown: renew now, which
			// tells when the lease is surely held until.
			return l.adopt(ctx, name, owner, o, cur, etag)
		}
		return nil, &HeldError{Holder: cur.lease(etag)}
	}
	token := fence.Token + 1
	lease := leaseDoc{ID: name, PK: name, Owner: owner, Token: token, TTL: int(o.TTL / time.Second)}
	b := l.c.NewTransactionalBatch(pk)
	fb, _ := json.Marshal(fenceDoc{ID: fenceID(name), PK: name, Token: token, TTL: -1})
	if fenceETag != nil {
		b.ReplaceItem(fenceID(name), fb, &azcosmos.TransactionalBatchItemOptions{IfMatchETag: fenceETag})
	} else {
		b.CreateItem(fb, nil)
	}
	// Create, not upsert: the counter's ETag already refuses a racing
	// acquirer, and create-only also refuses a live lease that a stale
	// read (a lagging replica) did not show us. The service treats an
	// expired lease as absent.
	lb, _ := json.Marshal(lease)
	b.CreateItem(lb, nil)
	sent := time.Now()
	resp, err := l.c.ExecuteTransactionalBatch(ctx, b, &azcosmos.TransactionalBatchOptions{EnableContentResponseOnWrite: true})
	if err == nil && resp.Success && len(resp.OperationResults) == 2 {
		var got leaseDoc
		if err := json.Unmarshal(resp.OperationResults[1].ResourceBody, &got); err != nil || got.TS == 0 {
			got = lease
			got.TS = time.Now().Unix()
		}
		return l.start(name, owner, o, &got, resp.OperationResults[1].ETag, sent), nil
	}
	if err == nil {
		// The batch was refused: the counter moved (412) or was created
		// (409) since we read it, or a lease exists (409), possibly
		// written by a retry of this very batch whose first attempt
		// applied. The lease tells which.
		err = errContended
		for _, r := range resp.OperationResults {
			switch r.StatusCode {
			case http.StatusFailedDependency, http.StatusPreconditionFailed, http.StatusConflict:
				continue
			}
			return nil, fmt.Errorf("lock: acquiring %q: the batch failed with status %d", name, r.StatusCode)
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// Refused or ambiguous: read the lease back; our own id there means the
	// write applied.
	cur, etag, rerr := l.readLease(ctx, name)
	if rerr != nil {
		return nil, errors.Join(err, rerr)
	}
	if cur != nil && cur.Owner == owner {
		// Sent at most this long ago, by this attempt or an automatic
		// retry of it inside the client.
		return l.start(name, owner, o, cur, etag, sent), nil
	}
	if cur != nil {
		return nil, &HeldError{Holder: cur.lease(etag)}
	}
	return nil, err
}

// readLease reads the live lease of name; nil when there is none (never
// taken, released, or expired).
func (l *Locker) readLease(ctx context.Context, name string) (*leaseDoc, azcore.ETag, error) {
	r, err := l.c.ReadItem(ctx, azcosmos.NewPartitionKeyString(name), name, nil)
	if statusOf(err) == http.StatusNotFound {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	var d leaseDoc
	if err := json.Unmarshal(r.Value, &d); err != nil {
		return nil, "", fmt.Errorf("lock: decoding lease %q: %w", name, err)
	}
	return &d, r.ETag, nil
}

// Holder reports the current lease of name, or nil if nobody holds it.
func (l *Locker) Holder(ctx context.Context, name string) (*Lease, error) {
	d, etag, err := l.readLease(ctx, name)
	if err != nil || d == nil {
		return nil, err
	}
	ls := d.lease(etag)
	return &ls, nil
}

func (d *leaseDoc) lease(etag azcore.ETag) Lease {
	return Lease{
		Name:      d.ID,
		Owner:     d.Owner,
		Token:     d.Token,
		ExpiresAt: time.Unix(d.TS+int64(d.TTL), 0),
		ETag:      etag,
	}
}

// Lock is a held lock. Its methods are safe for concurrent use.
type Lock struct {
	l     *Locker
	name  string
	owner string
	o     Options

	mu    sync.Mutex
	doc   leaseDoc
	etag  azcore.ETag
	valid time.Time // until when the lease is surely held (local monotonic clock)
	err   error     // why the lock ended, once it did

	ctx    context.Context
	cancel context.CancelCauseFunc
	lost   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// start returns the handle of a lease written by a request sent at sent,
// and starts renewing it.
func (l *Locker) start(name, owner string, o *Options, d *leaseDoc, etag azcore.ETag, sent time.Time) *Lock {
	h := l.handle(name, owner, o, d, etag, sent.Add(o.safeTTL()))
	go h.renewLoop()
	return h
}

// adopt takes over a lease found to be ours whose write time is unknown:
// it renews the lease before returning it.
func (l *Locker) adopt(ctx context.Context, name, owner string, o *Options, d *leaseDoc, etag azcore.ETag) (*Lock, error) {
	h := l.handle(name, owner, o, d, etag, time.Now())
	sent := time.Now()
	if _, err := h.renew(ctx); err != nil {
		if errors.Is(err, ErrLost) {
			// It expired or changed hands between our read and renewal.
			return nil, errContended
		}
		return nil, err
	}
	h.valid = sent.Add(o.safeTTL())
	go h.renewLoop()
	return h, nil
}

func (l *Locker) handle(name, owner string, o *Options, d *leaseDoc, etag azcore.ETag, valid time.Time) *Lock {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Lock{
		l: l, name: name, owner: owner, o: *o,
		doc: *d, etag: etag,
		valid:  valid,
		ctx:    ctx,
		cancel: cancel,
		lost:   make(chan struct{}),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
}

// Name is the lock's name.
func (h *Lock) Name() string { return h.name }

// Token is the fencing token of this acquisition.
func (h *Lock) Token() int64 { return h.doc.Token }

// Fence is what this holder's fenced writes carry: the lock's name and
// this acquisition's token.
func (h *Lock) Fence() Fence { return Fence{Name: h.name, Token: h.doc.Token} }

// Lease returns the lease as last written by this holder.
func (h *Lock) Lease() Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.doc.lease(h.etag)
}

// Lost is closed when the lock is no longer surely held: taken over,
// expired, or not renewed in time. It is not closed by Release.
func (h *Lock) Lost() <-chan struct{} { return h.lost }

// Context is cancelled when the lock is lost or released; its cause
// (context.Cause) is ErrLost or ErrReleased, wrapped.
func (h *Lock) Context() context.Context { return h.ctx }

// Err is nil while the lock is held, then why it ended.
func (h *Lock) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

func (h *Lock) end(err error, lost bool) {
	h.mu.Lock()
	first := h.err == nil
	if first {
		h.err = err
	}
	h.mu.Unlock()
	if first {
		if lost {
			close(h.lost)
		}
		h.cancel(err)
	}
}

// renewLoop renews the lease every RenewEvery until Release or loss.
func (h *Lock) renewLoop() {
	defer close(h.done)
	next := time.Now().Add(h.o.RenewEvery)
	// unknown is when the first renewal whose outcome is unknown (its reply
	// lost, a timeout, a 503) was sent, since the last one whose outcome is
	// known. A later renewal that finds the lease rewritten by us learns
	// that one of these applied, not which: the lease is then surely held
	// only from the earliest of them.
	var unknown time.Time
	for {
		h.mu.Lock()
		valid := h.valid
		h.mu.Unlock()
		wake := next
		if valid.Before(wake) {
			wake = valid
		}
		t := time.NewTimer(time.Until(wake))
		select {
		case <-h.stop:
			t.Stop()
			return
		case <-t.C:
		}
		if !time.Now().Before(valid) {
			h.end(fmt.Errorf("%w: %q was not renewed within its TTL", ErrLost, h.name), true)
			return
		}
		ctx, cancel := context.WithDeadline(context.Background(), valid)
		sent := time.Now()
		if unknown.IsZero() {
			unknown = sent
		}
		earlier, err := h.renew(ctx)
		cancel()
		switch {
		case err == nil:
			from := sent
			if earlier {
				// An earlier renewal applied though we never saw its reply:
				// the time to live runs from when that one was sent.
				from = unknown
			}
			unknown = time.Time{}
			h.mu.Lock()
			h.valid = from.Add(h.o.safeTTL())
			h.mu.Unlock()
			next = time.Now().Add(h.o.RenewEvery)
		case errors.Is(err, ErrLost):
			h.end(err, true)
			return
		default:
			// A transient failure: try again soon, until valid runs out.
			next = time.Now().Add(min(h.o.RenewEvery, 100*time.Millisecond))
		}
	}
}

// renew rewrites the lease conditionally on its ETag, which restarts its
// time to live. ErrLost when someone else holds it or it expired. earlier
// is true when this write was refused because the lease had been rewritten
// by this holder already: an earlier renewal applied though its reply was
// lost, and the time to live runs from that one.
func (h *Lock) renew(ctx context.Context) (earlier bool, err error) {
	h.mu.Lock()
	d, etag := h.doc, h.etag
	h.mu.Unlock()
	d.TS = 0
	b, _ := json.Marshal(d)
	pk := azcosmos.NewPartitionKeyString(h.name)
	r, err := h.l.c.ReplaceItem(ctx, pk, h.name, b, &azcosmos.ItemOptions{IfMatchEtag: &etag, EnableContentResponseOnWrite: true})
	if err == nil {
		var got leaseDoc
		if json.Unmarshal(r.Value, &got) == nil && got.TS != 0 {
			d.TS = got.TS
		}
		h.mu.Lock()
		h.doc, h.etag = d, r.ETag
		h.mu.Unlock()
		return false, nil
	}
	switch statusOf(err) {
	case http.StatusNotFound:
		return false, fmt.Errorf("%w: the lease of %q expired", ErrLost, h.name)
	case http.StatusPreconditionFailed:
		// Either someone else's lease, or our own renewal whose reply was
		// lost: read it to tell.
		cur, cetag, rerr := h.l.readLease(ctx, h.name)
		if rerr != nil {
			return false, rerr
		}
		if cur == nil {
			return false, fmt.Errorf("%w: the lease of %q expired", ErrLost, h.name)
		}
		if cur.Owner != h.owner {
			return false, fmt.Errorf("%w: %q was taken over by %s (token %d)", ErrLost, h.name, cur.Owner, cur.Token)
		}
		h.mu.Lock()
		h.doc, h.etag = *cur, cetag
		h.mu.Unlock()
		return true, nil
	}
	return false, err
}

// Release stops renewal and deletes the lease if, and only if, it is still
// this holder's: the delete is conditional on the lease's ETag, so a
// holder that lost its lock never deletes its successor's. It returns nil
// when nothing of this holder remains, whether it deleted the lease or the
// lease had already expired or been taken over (Err tells which).
func (h *Lock) Release(ctx context.Context) error {
	h.once.Do(func() { close(h.stop) })
	<-h.done
	defer h.end(fmt.Errorf("%w: %q", ErrReleased, h.name), false)
	pk := azcosmos.NewPartitionKeyString(h.name)
	for attempt := 0; ; attempt++ {
		h.mu.Lock()
		etag := h.etag
		h.mu.Unlock()
		_, err := h.l.c.DeleteItem(ctx, pk, h.name, &azcosmos.ItemOptions{IfMatchEtag: &etag})
		switch statusOf(err) {
		case 0:
			if err == nil {
				return nil
			}
		case http.StatusNotFound:
			return nil // expired, or our delete applied and this is a retry
		case http.StatusPreconditionFailed:
			cur, cetag, rerr := h.l.readLease(ctx, h.name)
			if rerr != nil {
				return rerr
			}
			if cur == nil || cur.Owner != h.owner {
				return nil // someone else's now: leave it alone
			}
			// Our own renewal applied without us seeing the reply.
			h.mu.Lock()
			h.doc, h.etag = *cur, cetag
			h.mu.Unlock()
			continue
		}
		if ctx.Err() != nil || attempt >= 5 || !retryable(err) {
			return fmt.Errorf("lock: releasing %q: %w", h.name, err)
		}
		time.Sleep(time.Duration(rand.Int64N(int64(50*time.Millisecond) << attempt)))
	}
}

// statusOf is the HTTP status of a response error, 0 for other errors
// (404/1002 counts as 503: see coord/internal/status).
func statusOf(err error) int { return status.Of(err) }

// retryable reports whether an error may go away by trying again: the lock
// is held, a race was lost, the service is busy or its partition is moving,
// or the transport failed.
func retryable(err error) bool {
	return errors.Is(err, ErrHeld) || errors.Is(err, errContended) || status.Transient(err)
}

func nonce() string {
	var b [8]byte
	_, _ = cryptorand.Read(b[:])
	return hex.EncodeToString(b[:])
}
