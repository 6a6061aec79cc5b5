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
	// Sent is how many times the buyer sent its write; Settled how many
	// of those lost their reply and were settled by reading back.
	Sent, Settled int
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
	seat, etag, err := s.readSeatAs(ctx, s.buyer, eventID, code)
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
// both read "available" both write "sold", and both get a ticket. When a
// write fails it tries the purchase again from the start, as code that
// builds its documents inside its retry loop does: after a reply that was
// lost although the write committed, the buyer buys the seat a second time.
func (a *attempt) buyNaive(ctx context.Context) Outcome {
	var err error
	for try := range buyerAttempts {
		if try > 0 {
			pause(ctx, try)
		}
		var orderID string
		if orderID, err = a.naiveOnce(ctx); err == nil {
			a.wrote(http.StatusOK)
			return *a.outcome(true, orderID, "Bought it: the seat looked free, so the write went through unchecked.")
		}
		if fateOf(err) == fateRefused {
			break
		}
	}
	return a.failed("The write failed", err)
}

// naiveOnce is one naive try: a fresh order and ticket, written one by one.
func (a *attempt) naiveOnce(ctx context.Context) (string, error) {
	order := a.newOrder()
	ticket := a.newTicket(order.ID)
	seat := a.seat
	seat.Status, seat.Holder, seat.OrderID = statusSold, a.userID, order.ID
	if a.trace.WriteStart.IsZero() {
		a.trace.WriteStart = time.Now()
	}
	a.trace.Sent++
	pk := azcosmos.NewPartitionKeyString(a.eventID)
	resp, err := a.shop.buyer.UpsertItem(ctx, pk, mustJSON(seat), nil) // last write wins
	if err != nil {
		return "", err
	}
	a.trace.WroteETag = resp.ETag
	if _, err := a.shop.buyer.UpsertItem(ctx, pk, mustJSON(a.claim(order.ID)), nil); err != nil {
		return "", err
	}
	for _, doc := range []any{order, ticket} {
		if _, err := a.shop.buyer.CreateItem(ctx, pk, mustJSON(doc), nil); err != nil {
			return "", err
		}
	}
	return order.ID, nil
}

// buyETag replaces the seat only if it is unchanged since it was read
// (If-Match), in one batch with the order and the ticket: a buyer whose read
// went stale gets 412 and nothing of the purchase is written. The seat
// names the order that bought it, and the order's id is chosen once, before
// the first try: when a reply is lost, the buyer reads the seat back, and
// its order on the seat says the purchase committed (settle).
func (a *attempt) buyETag(ctx context.Context) Outcome {
	order := a.newOrder()
	ticket := a.newTicket(order.ID)
	seat := a.seat
	seat.Status, seat.Holder, seat.OrderID = statusSold, a.userID, order.ID
	send := func() error {
		b := a.shop.buyer.NewTransactionalBatch(azcosmos.NewPartitionKeyString(a.eventID))
		b.ReplaceItem(seat.ID, mustJSON(seat), &azcosmos.TransactionalBatchItemOptions{IfMatchETag: &a.etag})
		b.UpsertItem(mustJSON(a.claim(order.ID)), nil)
		b.CreateItem(mustJSON(order), nil)
		b.CreateItem(mustJSON(ticket), nil)
		return a.write(ctx, b, 0)
	}
	settle := func() (bool, error) {
		now, etag, err := a.shop.readSeatAs(ctx, a.shop.buyer, a.eventID, a.code)
		if err != nil {
			return false, err
		}
		if now.OrderID == order.ID {
			a.trace.WroteETag = etag
			return true, nil
		}
		if etag == a.etag {
			return false, errNotApplied // unchanged: the write did not commit
		}
		return false, nil // another buyer's sale
	}
	won, err := a.sendSettled(ctx, send, settle)
	switch {
	case won:
		return *a.outcome(true, order.ID, "Bought it: the seat was unchanged since it was read."+a.settledNote("seat"))
	case err == nil, batchStatus(err) == http.StatusPreconditionFailed:
		return *a.outcome(false, "", "Taken by another buyer: the seat changed after it was read, so Cosmos refused the stale write (412 Precondition Failed).")
	default:
		return a.failed("The purchase failed", err)
	}
}

// buyBatch does not read at all: it creates the seat's claim (its id is the
// seat), the order and the ticket in one transactional batch, and marks the
// seat sold. A second buyer's create of the same claim id gets 409 and the
// whole batch rolls back. The claim names the order, chosen once: when a
// reply is lost, the buyer reads the claim back to learn whether it is its
// own (settle), instead of meeting its own claim's 409 and being told the
// seat was taken.
func (a *attempt) buyBatch(ctx context.Context) Outcome {
	order := a.newOrder()
	ticket := a.newTicket(order.ID)
	send := func() error {
		b := a.shop.buyer.NewTransactionalBatch(azcosmos.NewPartitionKeyString(a.eventID))
		b.CreateItem(mustJSON(a.claim(order.ID)), nil)
		b.PatchItem(seatID(a.code), soldPatch(a.userID, order.ID), nil)
		b.CreateItem(mustJSON(order), nil)
		b.CreateItem(mustJSON(ticket), nil)
		return a.write(ctx, b, 1)
	}
	settle := func() (bool, error) {
		resp, err := readRetrying(ctx, a.shop.buyer, a.eventID, claimID(a.code))
		if isStatus(err, http.StatusNotFound) {
			return false, errNotApplied // no claim: the write did not commit
		}
		if err != nil {
			return false, err
		}
		var c Claim
		if err := json.Unmarshal(resp.Value, &c); err != nil {
			return false, err
		}
		return c.OrderID == order.ID, nil
	}
	won, err := a.sendSettled(ctx, send, settle)
	switch {
	case won:
		return *a.outcome(true, order.ID, "Bought it: this buyer's claim on the seat was the first."+a.settledNote("seat's claim"))
	case err == nil, batchStatus(err) == http.StatusConflict:
		return *a.outcome(false, "", "Taken by another buyer: the seat's claim already existed, so the whole batch rolled back (409 Conflict).")
	default:
		return a.failed("The purchase failed", err)
	}
}

// errNotApplied is a settle's finding that the write did not commit.
var errNotApplied = errors.New("the write did not commit")

// sendSettled sends a purchase's write until its fate is known. A write the
// database refused (412, 409) is lost to another buyer: err says why. One
// refused before it applied (429) is sent again as it was. One whose reply
// was lost is settled: settle reads back what the write would have changed
// and says whether this buyer's order is there (won), or errNotApplied when
// nothing changed, and the same write is sent again. won false with err
// nil is a settle that found another buyer's sale.
func (a *attempt) sendSettled(ctx context.Context, send func() error, settle func() (bool, error)) (won bool, err error) {
	for try := range buyerAttempts {
		if try > 0 {
			pause(ctx, try)
		}
		err = send()
		if err == nil {
			return true, nil
		}
		switch fateOf(err) {
		case fateRefused:
			return false, err
		case fateNotApplied:
			continue
		}
		a.trace.Settled++
		won, serr := settle()
		switch {
		case errors.Is(serr, errNotApplied):
			continue
		case serr != nil:
			return false, fmt.Errorf("the reply was lost and reading back failed too: %w", serr)
		}
		if won {
			a.wrote(http.StatusOK)
		}
		return won, nil
	}
	return false, err
}

// settledNote says, after a purchase's message, how its lost replies were
// settled; "" when none was lost.
func (a *attempt) settledNote(what string) string {
	switch a.trace.Settled {
	case 0:
		return ""
	case 1:
		return " Its reply was lost on the way; reading the " + what + " back found this buyer's order there, so it was not sent again."
	}
	return fmt.Sprintf(" %d replies were lost on the way; each time the buyer read the %s back before deciding to send again.", a.trace.Settled, what)
}

// write runs the purchase's batch and traces it: its status, and the
// seat's new ETag (the result of operation seatOp) when it committed.
func (a *attempt) write(ctx context.Context, b azcosmos.TransactionalBatch, seatOp int) error {
	if a.trace.WriteStart.IsZero() {
		a.trace.WriteStart = time.Now()
	}
	a.trace.Sent++
	resp, err := a.shop.executeBatchOn(ctx, a.shop.buyer, b)
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
