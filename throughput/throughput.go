package throughput

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orrery-db/orrery/engine"
)

// offersTTL is how long the offers read from the engine are used before
// they are read again: a replaced offer takes effect within it.
const offersTTL = time.Second

// ruPerPhysicalPartition is what one physical partition of a database
// that shares its throughput serves, as the service divides it.
const ruPerPhysicalPartition = engine.RUPerPartitionKeyRange

// Enforcer holds the budgets of one server. Safe for concurrent use.
type Enforcer struct {
	eng *engine.Engine
	now func() time.Time

	offers   atomic.Pointer[offerSet]
	offersMu sync.Mutex

	mu      sync.Mutex
	buckets map[string]*bucket

	// estimate is the charge last paid by each operation, reserved when
	// one is admitted so that requests running at once do not all spend
	// the same budget.
	estimate sync.Map // operation name -> *atomic.Uint64 (float64 bits)

	throttled atomic.Int64
}

// Options configure an Enforcer.
type Options struct {
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// New returns an Enforcer over eng's offers.
func New(eng *engine.Engine, opts Options) *Enforcer {
	e := &Enforcer{eng: eng, now: opts.Now, buckets: map[string]*bucket{}}
	if e.now == nil {
		e.now = time.Now
	}
	return e
}

// Throttled is how many requests were refused for want of budget.
func (e *Enforcer) Throttled() int64 { return e.throttled.Load() }

// offerSet is the RU/s of each resource with an offer, by its RID.
type offerSet struct {
	read time.Time
	ru   map[string]int
}

// missTTL is how soon offers are read again when a container and its
// database are both missing from them (a container created meanwhile).
const missTTL = 100 * time.Millisecond

// offersOf returns the RU/s provisioned for a container and for its
// database, by RID.
func (e *Enforcer) offersOf(ctx context.Context, c *engine.Container, now time.Time) (coll, db int, collOK, dbOK bool) {
	set := e.offers.Load()
	if set == nil || now.Sub(set.read) > offersTTL {
		set = e.readOffers(ctx, now, offersTTL)
	}
	coll, collOK = set.ru[c.RID]
	db, dbOK = set.ru[c.Database().RID]
	if !collOK && !dbOK && now.Sub(set.read) > missTTL {
		set = e.readOffers(ctx, now, missTTL)
		coll, collOK = set.ru[c.RID]
		db, dbOK = set.ru[c.Database().RID]
	}
	return coll, db, collOK, dbOK
}

func (e *Enforcer) readOffers(ctx context.Context, now time.Time, ttl time.Duration) *offerSet {
	e.offersMu.Lock()
	defer e.offersMu.Unlock()
	if set := e.offers.Load(); set != nil && now.Sub(set.read) <= ttl {
		return set
	}
	set := &offerSet{read: now, ru: map[string]int{}}
	for _, o := range e.eng.ListOffers(ctx) {
		var body struct {
			Owner   string `json:"offerResourceId"`
			Content struct {
				Throughput int `json:"offerThroughput"`
				Autopilot  *struct {
					Max int `json:"maxThroughput"`
				} `json:"offerAutopilotSettings"`
			} `json:"content"`
		}
		if json.Unmarshal(o.Body, &body) != nil || body.Owner == "" {
			continue
		}
		ru := body.Content.Throughput
		if body.Content.Autopilot != nil && body.Content.Autopilot.Max > 0 {
			ru = body.Content.Autopilot.Max
		}
		set.ru[body.Owner] = ru
	}
	e.offers.Store(set)
	return set
}

// bucket is one physical partition's budget: RU that refill at rate per
// second up to one second's worth; it may go below zero by the charge of
// requests admitted while it had some left.
type bucket struct {
	mu      sync.Mutex
	rate    float64
	balance float64
	last    time.Time
}

// refill brings b up to now at rate. The caller holds b.mu.
func (b *bucket) refill(now time.Time, rate float64) {
	if b.rate != rate {
		b.rate = rate
		b.balance = min(b.balance, rate)
	}
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.balance = min(b.balance+dt*b.rate, b.rate)
		b.last = now
	}
}

func (e *Enforcer) bucket(key string, rate float64, now time.Time) *bucket {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, ok := e.buckets[key]
	if !ok {
		b = &bucket{rate: rate, balance: rate, last: now}
		e.buckets[key] = b
	}
	return b
}

// Ticket is an admitted request's claim on its partitions' budgets: Done
// pays its charge. A nil Ticket (a request no budget governs) is valid.
type Ticket struct {
	e        *Enforcer
	op       string
	buckets  []*bucket
	reserved float64 // per bucket
	done     bool
}

// Admit decides whether a request may run now. c is its container; rangeID
// the partition key range it reaches and epk (hex) the effective partition
// key it starts at, either or both "" when it reaches the whole container.
// It returns the request's ticket, or how long to wait before retrying.
func (e *Enforcer) Admit(ctx context.Context, c *engine.Container, rangeID, epk, op string) (*Ticket, time.Duration) {
	now := e.now()
	var keys []string
	var rate float64
	collRU, dbRU, collOK, dbOK := e.offersOf(ctx, c, now)
	if ru, ok := collRU, collOK; ok {
		ranges, _ := c.PartitionKeyRanges()
		rate = float64(ru) / float64(len(ranges))
		if rangeID == "" && epk != "" {
			rangeID = rangeContaining(ranges, epk)
		}
		if rangeID != "" {
			keys = []string{c.RID + "/" + rangeID}
		} else {
			for _, r := range ranges {
				keys = append(keys, c.RID+"/"+r.ID)
			}
		}
	} else if ru, ok := dbRU, dbOK; ok {
		// Shared throughput: the database's physical partitions, each
		// serving up to 10,000 RU/s, hold the key space in equal slices.
		n := max(1, (ru+ruPerPhysicalPartition-1)/ruPerPhysicalPartition)
		rate = float64(ru) / float64(n)
		if epk == "" && rangeID != "" {
			ranges, _ := c.PartitionKeyRanges()
			for _, r := range ranges {
				if r.ID == rangeID {
					epk = r.MinInclusive
				}
			}
		}
		db := c.Database().RID + "/"
		if epk != "" || n == 1 {
			keys = []string{db + strconv.Itoa(slice(epk, n))}
		} else {
			for i := range n {
				keys = append(keys, db+strconv.Itoa(i))
			}
		}
	} else {
		return nil, 0
	}
	t := &Ticket{e: e, op: op, buckets: make([]*bucket, len(keys))}
	est := e.estimateOf(op) / float64(len(keys))
	var wait float64
	refused := false
	for i, k := range keys {
		b := e.bucket(k, rate, now)
		t.buckets[i] = b
		b.mu.Lock()
		b.refill(now, rate)
		if b.balance <= 0 {
			refused = true
			wait = max(wait, -b.balance/b.rate)
		}
		b.mu.Unlock()
	}
	if refused {
		e.throttled.Add(1)
		// Until the budget is above zero again: at least a millisecond.
		ms := math.Ceil(wait*1000) + 1
		return nil, time.Duration(ms) * time.Millisecond
	}
	for _, b := range t.buckets {
		b.mu.Lock()
		b.balance -= est
		b.mu.Unlock()
	}
	t.reserved = est
	return t, 0
}

// Done pays the request's charge (RU) in place of what was reserved. A
// request that was not served pays 0.
func (t *Ticket) Done(charge float64) {
	if t == nil || t.done {
		return
	}
	t.done = true
	if charge > 0 {
		t.e.setEstimate(t.op, charge)
	}
	per := charge / float64(len(t.buckets))
	for _, b := range t.buckets {
		b.mu.Lock()
		b.balance += t.reserved - per
		b.mu.Unlock()
	}
}

func (e *Enforcer) estimateOf(op string) float64 {
	if v, ok := e.estimate.Load(op); ok {
		return math.Float64frombits(v.(*atomic.Uint64).Load())
	}
	return 1
}

func (e *Enforcer) setEstimate(op string, charge float64) {
	v, ok := e.estimate.Load(op)
	if !ok {
		v, _ = e.estimate.LoadOrStore(op, new(atomic.Uint64))
	}
	v.(*atomic.Uint64).Store(math.Float64bits(charge))
}

// rangeContaining returns the id of the range holding epk (hex).
func rangeContaining(ranges []engine.PartitionKeyRange, epk string) string {
	for _, r := range ranges {
		if epk >= r.MinInclusive && (r.MaxExclusive == "FF" || epk < r.MaxExclusive) {
			return r.ID
		}
	}
	return ""
}

// slice is which of n equal slices of the hash space epk (hex) falls in.
func slice(epk string, n int) int {
	if n <= 1 || epk == "" {
		return 0
	}
	head := epk
	if len(head) > 8 {
		head = head[:8]
	}
	for len(head) < 8 {
		head += "0"
	}
	v, err := strconv.ParseUint(head, 16, 32)
	if err != nil {
		return 0
	}
	// Effective partition keys are below 2^126: their first 32 bits are
	// below 2^30.
	return min(int(v*uint64(n)>>30), n-1)
}
