package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// Strategy is a way of selling one chosen seat.
type Strategy string

// The seat-buying strategies the race simulator compares.
const (
	// StrategyNaive reads the seat, sees it free, and writes it back blindly.
	StrategyNaive Strategy = "naive"
	// StrategyETag writes the seat back only if its ETag is still the one read.
	StrategyETag Strategy = "etag"
	// StrategyBatch creates the seat's claim id, the order and the ticket in
	// one transactional batch: a second create of the same id fails.
	StrategyBatch Strategy = "batch"
)

// strategies lists the strategies in the order the pages show them.
var strategies = []Strategy{StrategyNaive, StrategyETag, StrategyBatch}

// parseStrategy accepts a strategy name from a form.
func parseStrategy(s string) (Strategy, bool) {
	for _, st := range strategies {
		if string(st) == s {
			return st, true
		}
	}
	return "", false
}

// Outcome is what one buyer was told.
type Outcome struct {
	UserID  string
	Won     bool
	Failed  bool // neither won nor turned away: an error the buyer saw
	Message string
	OrderID string
	Latency time.Duration
	Trace   Trace
}

// Trace is what one buyer did on the wire, for the race's timeline: when it
// read the seat and what it saw, when it wrote and what the database
// answered.
type Trace struct {
	ReadStart, ReadEnd time.Time   // zero when the strategy does not read
	ReadETag           azcore.ETag // the seat's ETag as read
	ReadStatus         string      // the seat's status as read
	WriteStart         time.Time   // zero when the buyer did not write
	WriteEnd           time.Time
	WriteStatus        int         // the write's status: 200/201 committed, 412 or 409 refused
	WroteETag          azcore.ETag // the seat's ETag after this buyer's write, when it committed
}

// attempt is one buyer's purchase of one seat, split in two where a race
// falls: begin reads (when the strategy reads), finish writes.
type attempt struct {
	shop     *Shop
	strategy Strategy
	eventID  string
	code     string
	userID   string
	started  time.Time
	seat     Seat
	etag     azcore.ETag
	done     *Outcome // set when begin already decided the outcome
	trace    Trace
}

// begin starts a purchase: the naive and ETag strategies read the seat here.
func (s *Shop) begin(ctx context.Context, st Strategy, eventID, code, userID string) *attempt {
	a := &attempt{shop: s, strategy: st, eventID: eventID, code: code, userID: userID, started: time.Now()}
	if st == StrategyBatch {
		return a // no read: the create-only id is the check
	}
	a.trace.ReadStart = time.Now()
	seat, etag, err := s.readSeat(ctx, eventID, code)
	a.trace.ReadEnd, a.trace.ReadETag, a.trace.ReadStatus = time.Now(), etag, seat.Status
	switch {
	case err != nil:
		f := a.failed("The seat could not be read", err)
		a.done = &f
	case seat.Status != statusAvailable:
		a.done = a.outcome(false, "", "Already taken when this buyer looked.")
	}
	a.seat, a.etag = seat, etag
	return a
}

// finish writes the purchase and says what the buyer was told.
func (a *attempt) finish(ctx context.Context) Outcome {
	if a.done != nil {
		return *a.done
	}
	switch a.strategy {
	case StrategyNaive:
		return a.buyNaive(ctx)
	case StrategyETag:
		return a.buyETag(ctx)
	default:
		return a.buyBatch(ctx)
	}
}

// buyNaive is the bug: it trusts the read it made earlier. Two buyers who
// both read "available" both write "sold", and both get a ticket.
func (a *attempt) buyNaive(ctx context.Context) Outcome {
	order := a.newOrder()
	ticket := a.newTicket(order.ID)
	seat := a.seat
	seat.Status, seat.Holder, seat.OrderID = statusSold, a.userID, order.ID
	a.trace.WriteStart = time.Now()
	resp, err := a.shop.tickets.UpsertItem(ctx, azcosmos.NewPartitionKeyString(a.eventID), mustJSON(seat), nil) // last write wins
	if err != nil {
		return a.failed("The write failed", err)
	}
	a.trace.WroteETag = resp.ETag
	if err := a.shop.upsert(ctx, a.eventID, a.claim(order.ID)); err != nil {
		return a.failed("The write failed", err)
	}
	for _, doc := range []any{order, ticket} {
		if err := a.shop.create(ctx, a.eventID, doc); err != nil {
			return a.failed("The write failed", err)
		}
	}
	a.wrote(http.StatusOK)
	return *a.outcome(true, order.ID, "Bought it: the seat looked free, so the write went through unchecked.")
}

// buyETag replaces the seat only if it is unchanged since it was read
// (If-Match), in one batch with the order and the ticket: a buyer whose read
// went stale gets 412 and nothing of the purchase is written.
func (a *attempt) buyETag(ctx context.Context) Outcome {
	order := a.newOrder()
	ticket := a.newTicket(order.ID)
	seat := a.seat
	seat.Status, seat.Holder, seat.OrderID = statusSold, a.userID, order.ID
	b := a.shop.tickets.NewTransactionalBatch(azcosmos.NewPartitionKeyString(a.eventID))
	b.ReplaceItem(seat.ID, mustJSON(seat), &azcosmos.TransactionalBatchItemOptions{IfMatchETag: &a.etag})
	b.UpsertItem(mustJSON(a.claim(order.ID)), nil)
	b.CreateItem(mustJSON(order), nil)
	b.CreateItem(mustJSON(ticket), nil)
	err := a.write(ctx, b, 0)
	switch {
	case err == nil:
		return *a.outcome(true, order.ID, "Bought it: the seat was unchanged since it was read.")
	case batchStatus(err) == http.StatusPreconditionFailed:
		return *a.outcome(false, "", "Taken by another buyer: the seat changed after it was read, so Cosmos refused the stale write (412 Precondition Failed).")
	default:
		return a.failed("The purchase failed", err)
	}
}

// buyBatch does not read at all: it creates the seat's claim (its id is the
// seat), the order and the ticket in one transactional batch, and marks the
// seat sold. A second buyer's create of the same claim id gets 409 and the
// whole batch rolls back.
func (a *attempt) buyBatch(ctx context.Context) Outcome {
	order := a.newOrder()
	ticket := a.newTicket(order.ID)
	b := a.shop.tickets.NewTransactionalBatch(azcosmos.NewPartitionKeyString(a.eventID))
	b.CreateItem(mustJSON(a.claim(order.ID)), nil)
	b.PatchItem(seatID(a.code), soldPatch(a.userID, order.ID), nil)
	b.CreateItem(mustJSON(order), nil)
	b.CreateItem(mustJSON(ticket), nil)
	err := a.write(ctx, b, 1)
	switch {
	case err == nil:
		return *a.outcome(true, order.ID, "Bought it: this buyer's claim on the seat was the first.")
	case batchStatus(err) == http.StatusConflict:
		return *a.outcome(false, "", "Taken by another buyer: the seat's claim already existed, so the whole batch rolled back (409 Conflict).")
	default:
		return a.failed("The purchase failed", err)
	}
}

// write runs the purchase's batch and traces it: its status, and the
// seat's new ETag (the result of operation seatOp) when it committed.
func (a *attempt) write(ctx context.Context, b azcosmos.TransactionalBatch, seatOp int) error {
	a.trace.WriteStart = time.Now()
	resp, err := a.shop.executeBatch(ctx, b)
	switch {
	case err == nil:
		if seatOp < len(resp.OperationResults) {
			a.trace.WroteETag = resp.OperationResults[seatOp].ETag
		}
		a.wrote(http.StatusOK)
	case batchStatus(err) != 0:
		a.wrote(batchStatus(err))
	default:
		a.wrote(0)
	}
	return err
}

// wrote records the end of the buyer's write and its status.
func (a *attempt) wrote(status int) {
	a.trace.WriteEnd, a.trace.WriteStatus = time.Now(), status
}

// soldPatch marks a seat sold to a user by an order.
func soldPatch(userID, orderID string) azcosmos.PatchOperations {
	var p azcosmos.PatchOperations
	p.AppendSet("/status", statusSold)
	p.AppendSet("/holder", userID)
	p.AppendSet("/orderId", orderID)
	return p
}

// outcome is what the buyer is told, timed from the start of the attempt.
func (a *attempt) outcome(won bool, orderID, msg string) *Outcome {
	return &Outcome{UserID: a.userID, Won: won, OrderID: orderID, Message: msg, Latency: time.Since(a.started), Trace: a.trace}
}

// failed is the outcome of an error that is not a lost race.
func (a *attempt) failed(msg string, err error) Outcome {
	if !a.trace.WriteStart.IsZero() && a.trace.WriteEnd.IsZero() {
		var re *azcore.ResponseError
		if errors.As(err, &re) {
			a.wrote(re.StatusCode)
		} else {
			a.wrote(0)
		}
	}
	o := a.outcome(false, "", msg+": "+plainError(err))
	o.Failed = true
	return *o
}

// claim is the document that says this buyer took the seat.
func (a *attempt) claim(orderID string) Claim {
	return Claim{ID: claimID(a.code), Type: typeClaim, EventID: a.eventID, Seat: a.code, UserID: a.userID, OrderID: orderID}
}

// newOrder is the buyer's paid order for the seat.
func (a *attempt) newOrder() Order {
	return Order{ID: newID("order"), Type: typeOrder, EventID: a.eventID, UserID: a.userID,
		Seats: []string{a.code}, Total: priceOf(a.code), Strategy: string(a.strategy), Status: "paid", Created: time.Now().UTC()}
}

// newTicket is the buyer's ticket for the seat.
func (a *attempt) newTicket(orderID string) Ticket {
	return Ticket{ID: newID("ticket"), Type: typeTicket, EventID: a.eventID, Seat: a.code,
		OwnerID: a.userID, OrderID: orderID, Status: "active", Created: time.Now().UTC()}
}

// priceOf returns a seat's price from its section code.
func priceOf(code string) int {
	sec, _, _ := strings.Cut(code, "-")
	for _, v := range []Venue{orionHall, stormArena} {
		for _, s := range v.Sections {
			if s.Code == sec {
				return s.Price
			}
		}
	}
	return 0
}

// newID returns a fresh random id with a prefix.
func newID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// mustJSON encodes a document the app itself built.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encoding %T: %v", v, err))
	}
	return b
}

// plainError says what went wrong in words for a page: the status of a
// Cosmos response rather than its raw body.
func plainError(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return fmt.Sprintf("the database answered %d %s", re.StatusCode, http.StatusText(re.StatusCode))
	}
	return err.Error()
}

// validSeat reports whether code names a seat of the sample venue.
func validSeat(code string) bool {
	for _, s := range orionHall.Sections {
		for r := 1; r <= s.Rows; r++ {
			for n := 1; n <= s.Seats; n++ {
				if seatCode(s.Code, r, n) == code {
					return true
				}
			}
		}
	}
	return false
}
