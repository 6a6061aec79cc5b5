package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord/lock"
)

// BestOutcome is what one best-available buyer got.
type BestOutcome struct {
	UserID  string
	Won     bool
	Seats   []string
	Token   int64 // the lock's fencing token, when a lock was used
	Message string
	Latency time.Duration
}

// BestResult is a best-available race: several buyers each asking the site
// to pick and sell them the best n seats at the same moment.
type BestResult struct {
	EventID  string
	Count    int
	Locked   bool
	Stalled  bool // the first buyer stalled past its lease (bestWithStall)
	Outcomes []BestOutcome
	Overlap  []string // seats given to more than one buyer
}

// bestAvailable races buyers for the best n seats of an event. Without the
// lock every buyer queries the free seats before any of them writes, picks
// the same best ones, and writes them: the overlap the page shows. With the
// lock, choosing and selling is one critical section per event, so each
// buyer picks among the seats the previous one left.
func bestAvailable(ctx context.Context, shop *Shop, locker *lock.Locker, eventID string, users []string, n int) (BestResult, error) {
	res := BestResult{EventID: eventID, Count: n, Locked: locker != nil, Outcomes: make([]BestOutcome, len(users))}
	var wg sync.WaitGroup
	if locker == nil {
		picks := make([][]Seat, len(users))
		errs := make([]error, len(users))
		for i := range users {
			wg.Go(func() { picks[i], errs[i] = pickBest(ctx, shop, eventID, n) })
		}
		wg.Wait() // every buyer has chosen: now they all write
		for i, u := range users {
			wg.Go(func() {
				started := time.Now()
				res.Outcomes[i] = sellUnlocked(ctx, shop, eventID, u, picks[i], errs[i])
				res.Outcomes[i].Latency = time.Since(started)
			})
		}
	} else {
		for i, u := range users {
			wg.Go(func() {
				started := time.Now()
				res.Outcomes[i] = sellLocked(ctx, shop, locker, eventID, u, n)
				res.Outcomes[i].Latency = time.Since(started)
			})
		}
	}
	wg.Wait()
	owners := map[string]int{}
	for _, o := range res.Outcomes {
		for _, s := range o.Seats {
			owners[s]++
		}
	}
	for s, k := range owners {
		if k > 1 {
			res.Overlap = append(res.Overlap, s)
		}
	}
	slices.Sort(res.Overlap)
	return res, nil
}

// pickBest returns the n best available seats of an event.
func pickBest(ctx context.Context, shop *Shop, eventID string, n int) ([]Seat, error) {
	seats, err := shop.seats(ctx, eventID)
	if err != nil {
		return nil, err
	}
	seats = slices.DeleteFunc(seats, func(s Seat) bool { return s.Status != statusAvailable })
	slices.SortFunc(seats, func(a, b Seat) int { return a.Rank - b.Rank })
	if len(seats) < n {
		return nil, fmt.Errorf("only %d seats left", len(seats))
	}
	return seats[:n], nil
}

// sellUnlocked writes the seats it picked earlier, trusting that pick.
func sellUnlocked(ctx context.Context, shop *Shop, eventID, userID string, picked []Seat, pickErr error) BestOutcome {
	out := BestOutcome{UserID: userID}
	if pickErr != nil {
		out.Message = "No seats: " + plainError(pickErr)
		return out
	}
	order := newOrder(eventID, userID, picked, "best available, no lock")
	for _, s := range picked {
		s.Status, s.Holder, s.OrderID = statusSold, userID, order.ID
		if err := shop.upsert(ctx, eventID, s); err != nil { // last write wins
			out.Message = "The write failed: " + plainError(err)
			return out
		}
	}
	if err := shop.recordSale(ctx, eventID, order, false); err != nil {
		out.Message = "The order could not be written: " + plainError(err)
		return out
	}
	out.Won, out.Seats = true, order.Seats
	out.Message = "Bought the best seats it saw when it looked."
	return out
}

// bestLockTTL is the best-available lock's time to live: the critical
// section is a query and a few writes.
const bestLockTTL = 5 * time.Second

// sellLocked picks and sells the best seats while holding the event's
// best-available lock. Every seat write carries the lock's fencing token:
// a holder that stalled past its lease and woke up after another buyer took
// the lock is refused instead of overwriting the newer sale.
func sellLocked(ctx context.Context, shop *Shop, locker *lock.Locker, eventID, userID string, n int) BestOutcome {
	out := BestOutcome{UserID: userID}
	lk, err := locker.Acquire(ctx, "best-"+eventID, &lock.Options{TTL: bestLockTTL, Owner: userID})
	if err != nil {
		out.Message = "Could not get the lock: " + plainError(err)
		return out
	}
	defer lk.Release(context.WithoutCancel(ctx))
	out.Token = lk.Token()
	work := lk.Context() // ends if the lock is lost
	picked, err := pickBest(work, shop, eventID, n)
	if err != nil {
		out.Message = "No seats: " + plainError(err)
		return out
	}
	order := newOrder(eventID, userID, picked, "best available, lock")
	for _, s := range picked {
		_, err := lock.FencedPatch(work, shop.tickets, azcosmos.NewPartitionKeyString(eventID), s.ID, lk.Fence(), soldPatch(userID, order.ID))
		if errors.Is(err, lock.ErrFenced) {
			out.Message = "Fenced out: a newer lock holder has written this seat, so this stale write was refused."
			return out
		}
		if err != nil {
			out.Message = "The write failed: " + plainError(err)
			return out
		}
	}
	if err := shop.recordSale(work, eventID, order, true); err != nil {
		out.Message = "The order could not be written: " + plainError(err)
		return out
	}
	out.Won, out.Seats = true, order.Seats
	out.Message = fmt.Sprintf("Bought the best seats left, inside the lock (fencing token %d).", lk.Token())
	return out
}

// newOrder is a paid order for seats.
func newOrder(eventID, userID string, seats []Seat, how string) Order {
	o := Order{ID: newID("order"), Type: typeOrder, EventID: eventID, UserID: userID,
		Strategy: how, Status: "paid", Created: time.Now().UTC()}
	for _, s := range seats {
		o.Seats = append(o.Seats, s.Code)
		o.Total += s.Price
	}
	return o
}

// recordSale writes an order with its seats' claims and tickets in one
// transactional batch. createClaims says whether a claim that exists fails
// the batch (create) or is overwritten (upsert, the naive path's blind
// write).
func (s *Shop) recordSale(ctx context.Context, eventID string, o Order, createClaims bool) error {
	b := s.tickets.NewTransactionalBatch(azcosmos.NewPartitionKeyString(eventID))
	for _, code := range o.Seats {
		c := mustJSON(Claim{ID: claimID(code), Type: typeClaim, EventID: eventID, Seat: code, UserID: o.UserID, OrderID: o.ID})
		if createClaims {
			b.CreateItem(c, nil)
		} else {
			b.UpsertItem(c, nil)
		}
		b.CreateItem(mustJSON(Ticket{ID: newID("ticket"), Type: typeTicket, EventID: eventID, Seat: code,
			OwnerID: o.UserID, OrderID: o.ID, Status: "active", Created: time.Now().UTC()}), nil)
	}
	b.CreateItem(mustJSON(o), nil)
	return s.execute(ctx, b)
}

// stalledTTL is the lease of the stalled holder in bestWithStall: short, so
// the demonstration takes seconds.
const stalledTTL = 2 * time.Second

// bestWithStall shows what the fencing token is for. The first buyer takes
// the lock and chooses the best seats, then stalls (a long pause, as a
// frozen process or a garbage collection would cause) and stops renewing:
// its lease expires on the server and the second buyer gets the lock,
// chooses the same seats and buys them. Then the first buyer wakes up,
// still believing it holds the lock, and writes its seats: every write
// carries its old token, so the seats refuse it.
func bestWithStall(ctx context.Context, shop *Shop, locker *lock.Locker, eventID, stalled, next string, n int) (BestResult, error) {
	res := BestResult{EventID: eventID, Count: n, Locked: true, Stalled: true}
	started := time.Now()
	lk, err := locker.Acquire(ctx, "best-"+eventID, &lock.Options{TTL: stalledTTL, RenewEvery: time.Hour, Owner: stalled})
	if err != nil {
		return res, err
	}
	defer lk.Release(context.WithoutCancel(ctx)) // ETag-guarded: leaves a newer holder's lease alone
	picked, err := pickBest(ctx, shop, eventID, n)
	if err != nil {
		return res, err
	}
	// The stall: while this buyer sleeps, the next one waits for the lock,
	// gets it once the stalled lease has expired, and buys.
	waited := time.Now()
	other := sellLocked(ctx, shop, locker, eventID, next, n)
	other.Latency = time.Since(waited)

	// Awake again, ignoring lk.Lost() as a process that was frozen would.
	zombie := BestOutcome{UserID: stalled, Token: lk.Token()}
	order := newOrder(eventID, stalled, picked, "best available, lock, after a stall")
	for _, s := range picked {
		_, err := lock.FencedPatch(ctx, shop.tickets, azcosmos.NewPartitionKeyString(eventID), s.ID, lk.Fence(), soldPatch(stalled, order.ID))
		if errors.Is(err, lock.ErrFenced) {
			zombie.Message = fmt.Sprintf("Stalled past its lease, woke up and wrote with fencing token %d: refused, the seat had accepted token %d.", lk.Token(), other.Token)
			break
		}
		if err != nil {
			zombie.Message = "The write failed: " + plainError(err)
			break
		}
		zombie.Seats = append(zombie.Seats, s.Code)
	}
	if zombie.Message == "" {
		if err := shop.recordSale(ctx, eventID, order, true); err != nil {
			zombie.Message = "The order could not be written: " + plainError(err)
		} else {
			zombie.Won = true
			zombie.Message = "Bought the seats it chose before it stalled."
		}
	}
	zombie.Latency = time.Since(started)
	res.Outcomes = []BestOutcome{zombie, other}
	for _, s := range zombie.Seats {
		if slices.Contains(other.Seats, s) {
			res.Overlap = append(res.Overlap, s)
		}
	}
	return res, nil
}
