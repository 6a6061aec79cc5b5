package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord"
	"github.com/orrery-db/orrery/coord/lock"
	"github.com/orrery-db/orrery/coord/outbox"
	"github.com/orrery-db/orrery/coord/saga"
)

// PurchaseInput is what a purchase saga is started with.
type PurchaseInput struct {
	EventID string   `json:"eventId"`
	Event   string   `json:"event"`
	UserID  string   `json:"userId"`
	Seats   []string `json:"seats"`
	Total   int      `json:"total"`
}

// The purchase saga's steps, in order. The confirmation is not one of
// them: a message cannot be unsent, and a purchase must not be refunded
// because messaging is down. It is committed to the outbox once the saga has
// completed (queueConfirmation), and the relay sends it when it can.
const (
	stepHold   = "hold-seats"
	stepCharge = "charge-card"
	stepIssue  = "issue-tickets"
)

// sagaSteps lists the steps in the order they run.
var sagaSteps = []string{stepHold, stepCharge, stepIssue}

// Charge is a card payment at the (simulated) payment provider, one per
// saga: its id is the step's idempotency key, so a retried charge cannot
// charge twice, and a refund that finds no charge leaves a cancelled one
// behind so that a late charge is refused.
type Charge struct {
	ID      string    `json:"id"`
	Type    string    `json:"type"`
	UserID  string    `json:"userId"`
	EventID string    `json:"eventId"`
	Amount  int       `json:"amount"`
	Status  string    `json:"status"` // approved, declined, refunded, cancelled
	At      time.Time `json:"at"`
}

// Purchases runs the purchase saga: hold the seats, charge the card, issue
// the tickets; then, once the saga has completed, the confirmation goes out
// through the outbox. The participants are separate services (the seat
// inventory, the payment provider, the ticketing system), so no transaction
// spans them: coord/saga records each step and, when one fails, runs the
// compensations of those done, in reverse.
type Purchases struct {
	shop     *Shop
	payments *azcosmos.ContainerClient
	outbox   *outbox.Outbox
	switches *Switches
	exec     *saga.Executor
}

// newPurchases wires the saga's steps to its participants. ob is the
// outbox of the tickets container, which the app's relay publishes.
func newPurchases(shop *Shop, sagas, payments *azcosmos.ContainerClient, ob *outbox.Outbox, locks *lock.Locker, sw *Switches) (*Purchases, error) {
	p := &Purchases{shop: shop, payments: payments, outbox: ob, switches: sw}
	exec, err := saga.New(sagas, "purchase", []saga.Step{
		{Name: stepHold, Action: p.holdSeats, Compensate: p.releaseSeats},
		{Name: stepCharge, Action: p.chargeCard, Compensate: p.refundCard},
		{Name: stepIssue, Action: p.issueTickets, Compensate: p.revokeTickets},
	}, saga.Options{Locks: locks, CompensationBackoff: 50 * time.Millisecond})
	p.exec = exec
	return p, err
}

// Buy runs one purchase to its end, completed or compensated, and, when it
// completed, queues the confirmation in the outbox. A failure to queue it
// does not undo the purchase: the order stays owed a confirmation, and the
// recoverer queues it (queueOwed).
func (p *Purchases) Buy(ctx context.Context, in PurchaseInput) (saga.State, error) {
	st, err := p.exec.Start(ctx, saga.NewID(), in)
	if err != nil || st.Status != coord.SagaCompleted {
		return st, err
	}
	if _, err := p.queueConfirmation(ctx, st.ID, in); err != nil {
		return st, fmt.Errorf("the purchase is complete, but its confirmation is not queued yet (it will be): %w", err)
	}
	return st, nil
}

// input decodes a saga's input.
func input(c saga.Call) (PurchaseInput, error) {
	var in PurchaseInput
	err := json.Unmarshal(c.Input, &in)
	return in, err
}

// holdSeats claims the seats for this saga (create-only claim ids, so a seat
// someone else holds or bought fails the step) and marks them held, in one
// batch. A retry finds its own claims and succeeds.
func (p *Purchases) holdSeats(ctx context.Context, c saga.Call) error {
	in, err := input(c)
	if err != nil {
		return err
	}
	b := p.shop.tickets.NewTransactionalBatch(azcosmos.NewPartitionKeyString(in.EventID))
	for _, code := range in.Seats {
		b.CreateItem(mustJSON(Claim{ID: claimID(code), Type: typeClaim, EventID: in.EventID, Seat: code, UserID: in.UserID, OrderID: c.SagaID}), nil)
		var held azcosmos.PatchOperations
		held.AppendSet("/status", statusHeld)
		held.AppendSet("/holder", in.UserID)
		held.AppendSet("/orderId", c.SagaID)
		b.PatchItem(seatID(code), held, nil)
	}
	err = p.shop.execute(ctx, b)
	if batchStatus(err) == http.StatusConflict {
		if mine, _ := p.ownClaims(ctx, in, c.SagaID); mine == len(in.Seats) {
			return nil // a retry: the hold is already ours
		}
		return errors.New("the seat was taken by another buyer")
	}
	return err
}

// ownClaims counts the seats this saga has claimed.
func (p *Purchases) ownClaims(ctx context.Context, in PurchaseInput, sagaID string) (int, error) {
	n := 0
	for _, code := range in.Seats {
		resp, err := p.shop.tickets.ReadItem(ctx, azcosmos.NewPartitionKeyString(in.EventID), claimID(code), nil)
		if isStatus(err, http.StatusNotFound) {
			continue
		}
		if err != nil {
			return n, err
		}
		var cl Claim
		if json.Unmarshal(resp.Value, &cl) == nil && cl.OrderID == sagaID {
			n++
		}
	}
	return n, nil
}

// releaseSeats puts back on sale the seats this saga claimed, and only
// those: a seat someone else holds is left alone.
func (p *Purchases) releaseSeats(ctx context.Context, c saga.Call) error {
	in, err := input(c)
	if err != nil {
		return err
	}
	pk := azcosmos.NewPartitionKeyString(in.EventID)
	for _, code := range in.Seats {
		resp, err := p.shop.tickets.ReadItem(ctx, pk, claimID(code), nil)
		if isStatus(err, http.StatusNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		var cl Claim
		if err := json.Unmarshal(resp.Value, &cl); err != nil || cl.OrderID != c.SagaID {
			continue
		}
		b := p.shop.tickets.NewTransactionalBatch(pk)
		b.DeleteItem(claimID(code), &azcosmos.TransactionalBatchItemOptions{IfMatchETag: &resp.ETag})
		var free azcosmos.PatchOperations
		free.AppendSet("/status", statusAvailable)
		free.AppendSet("/holder", "")
		free.AppendSet("/orderId", "")
		free.AppendSet("/releasedBy", c.SagaID)
		b.PatchItem(seatID(code), free, nil)
		if err := p.shop.execute(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// chargeCard charges the buyer once per saga: the charge's id is the
// step's key. The payment switch makes the provider decline.
func (p *Purchases) chargeCard(ctx context.Context, c saga.Call) error {
	in, err := input(c)
	if err != nil {
		return err
	}
	ch := Charge{ID: "charge-" + c.SagaID, Type: "charge", UserID: in.UserID, EventID: in.EventID, Amount: in.Total, Status: "approved", At: time.Now().UTC()}
	if p.switches.PaymentDeclines.Load() {
		ch.Status = "declined"
	}
	_, err = p.payments.CreateItem(ctx, azcosmos.NewPartitionKeyString(in.UserID), mustJSON(ch), nil)
	if isStatus(err, http.StatusConflict) {
		prev, rerr := p.charge(ctx, in.UserID, ch.ID)
		if rerr != nil {
			return rerr
		}
		ch.Status = prev.Status // a retry: the first attempt's answer stands
	} else if err != nil {
		return err
	}
	if ch.Status != "approved" {
		return fmt.Errorf("the card was %s", ch.Status)
	}
	return nil
}

// charge reads a charge at the payment provider.
func (p *Purchases) charge(ctx context.Context, userID, id string) (Charge, error) {
	resp, err := p.payments.ReadItem(ctx, azcosmos.NewPartitionKeyString(userID), id, nil)
	if err != nil {
		return Charge{}, err
	}
	var ch Charge
	err = json.Unmarshal(resp.Value, &ch)
	return ch, err
}

// refundCard refunds an approved charge; when there is none it records the
// charge as cancelled, so a charge that arrives late is refused.
func (p *Purchases) refundCard(ctx context.Context, c saga.Call) error {
	in, err := input(c)
	if err != nil {
		return err
	}
	id := "charge-" + c.SagaID
	cancelled := Charge{ID: id, Type: "charge", UserID: in.UserID, EventID: in.EventID, Amount: in.Total, Status: "cancelled", At: time.Now().UTC()}
	_, err = p.payments.CreateItem(ctx, azcosmos.NewPartitionKeyString(in.UserID), mustJSON(cancelled), nil)
	if !isStatus(err, http.StatusConflict) {
		return err
	}
	ch, err := p.charge(ctx, in.UserID, id)
	if err != nil || ch.Status != "approved" {
		return err // declined, refunded or cancelled: nothing to give back
	}
	var refund azcosmos.PatchOperations
	refund.AppendSet("/status", "refunded")
	refund.SetCondition("FROM c WHERE c.status = 'approved'")
	_, err = p.payments.PatchItem(ctx, azcosmos.NewPartitionKeyString(in.UserID), id, refund, nil)
	if isStatus(err, http.StatusPreconditionFailed) {
		return nil // refunded meanwhile
	}
	return err
}

// orderOf is the id of a saga's order: one per saga.
func orderOf(sagaID string) string { return "order-" + sagaID }

// sagaStrategy is the strategy recorded on the purchase saga's orders.
const sagaStrategy = "purchase saga"

// issueTickets writes the order and a ticket per seat and marks the seats
// sold, in one batch; the order's id makes it happen once. The ticketing
// switch makes the ticketing system fail.
func (p *Purchases) issueTickets(ctx context.Context, c saga.Call) error {
	if p.switches.TicketingDown.Load() {
		return errors.New("the ticketing system is unavailable")
	}
	in, err := input(c)
	if err != nil {
		return err
	}
	b := p.shop.tickets.NewTransactionalBatch(azcosmos.NewPartitionKeyString(in.EventID))
	b.CreateItem(mustJSON(Order{ID: orderOf(c.SagaID), Type: typeOrder, EventID: in.EventID, UserID: in.UserID,
		Seats: in.Seats, Total: in.Total, Strategy: sagaStrategy, SagaID: c.SagaID, Status: "paid", Created: time.Now().UTC()}), nil)
	for _, code := range in.Seats {
		b.CreateItem(mustJSON(Ticket{ID: "ticket-" + c.SagaID + "-" + code, Type: typeTicket, EventID: in.EventID, Seat: code,
			OwnerID: in.UserID, OrderID: orderOf(c.SagaID), Status: "active", Created: time.Now().UTC()}), nil)
		b.PatchItem(seatID(code), soldPatch(in.UserID, c.SagaID), nil)
	}
	err = p.shop.execute(ctx, b)
	if batchStatus(err) == http.StatusConflict {
		o, _, rerr := p.order(ctx, in.EventID, c.SagaID)
		if rerr == nil && o.Status == "paid" {
			return nil // a retry: already issued
		}
		return errors.New("the order was cancelled before the tickets were issued")
	}
	return err
}

// order reads a saga's order and its ETag.
func (p *Purchases) order(ctx context.Context, eventID, sagaID string) (Order, azcore.ETag, error) {
	resp, err := p.shop.tickets.ReadItem(ctx, azcosmos.NewPartitionKeyString(eventID), orderOf(sagaID), nil)
	if err != nil {
		return Order{}, "", err
	}
	var o Order
	err = json.Unmarshal(resp.Value, &o)
	return o, resp.ETag, err
}

// revokeTickets cancels the order, revokes its tickets and puts the seats
// back on hold (releasing them is the previous step's compensation), in one
// batch; with no order it records a cancelled one so a late issue fails.
func (p *Purchases) revokeTickets(ctx context.Context, c saga.Call) error {
	in, err := input(c)
	if err != nil {
		return err
	}
	cancelled := Order{ID: orderOf(c.SagaID), Type: typeOrder, EventID: in.EventID, UserID: in.UserID,
		Seats: in.Seats, Total: in.Total, Strategy: sagaStrategy, SagaID: c.SagaID, Status: "cancelled", Created: time.Now().UTC()}
	err = p.shop.create(ctx, in.EventID, cancelled)
	if !isStatus(err, http.StatusConflict) {
		return err
	}
	o, _, err := p.order(ctx, in.EventID, c.SagaID)
	if err != nil || o.Status != "paid" {
		return err
	}
	b := p.shop.tickets.NewTransactionalBatch(azcosmos.NewPartitionKeyString(in.EventID))
	var cancel azcosmos.PatchOperations
	cancel.AppendSet("/status", "refunded")
	b.PatchItem(orderOf(c.SagaID), cancel, nil)
	for _, code := range in.Seats {
		var revoke azcosmos.PatchOperations
		revoke.AppendSet("/status", "revoked")
		b.PatchItem("ticket-"+c.SagaID+"-"+code, revoke, nil)
		var held azcosmos.PatchOperations
		held.AppendSet("/status", statusHeld)
		b.PatchItem(seatID(code), held, nil)
	}
	return p.shop.execute(ctx, b)
}

// confirmationID is the outbox message id of a purchase's confirmation:
// one per saga, so the inbox delivers it once however often it is relayed.
func confirmationID(sagaID string) string { return "confirm-" + sagaID }

// queueConfirmation commits a completed purchase's confirmation to the
// outbox: one transactional batch in the event's partition marks the order
// "confirmation queued" (on the ETag it was read with) and creates the
// outbox record, so the message is owed exactly when the order says so,
// whether or not messaging is up. The record's id is the saga's, so a second
// caller (the recoverer racing the buyer) is refused whole. It reports
// whether this call queued it; an order that is not paid gets nothing.
func (p *Purchases) queueConfirmation(ctx context.Context, sagaID string, in PurchaseInput) (bool, error) {
	for {
		o, etag, err := p.order(ctx, in.EventID, sagaID)
		if err != nil {
			return false, err
		}
		if o.Status != "paid" || o.Confirmation != "" {
			return false, nil
		}
		text := fmt.Sprintf("Your tickets for %s are confirmed: %s, $%d.", in.Event, seatList(in.Seats), in.Total)
		b := p.shop.tickets.NewTransactionalBatch(azcosmos.NewPartitionKeyString(in.EventID))
		var mark azcosmos.PatchOperations
		mark.AppendSet("/confirmation", confirmationQueued)
		b.PatchItem(orderOf(sagaID), mark, &azcosmos.TransactionalBatchItemOptions{IfMatchETag: &etag})
		if err := p.outbox.Add(&b, in.EventID, outbox.Message{ID: confirmationID(sagaID), Topic: "purchase.confirmed",
			Payload: mustJSON(notice{UserID: in.UserID, Text: text})}); err != nil {
			return false, err
		}
		err = outbox.Commit(p.shop.tickets.ExecuteTransactionalBatch(ctx, b, nil))
		var be *outbox.BatchError
		if errors.As(err, &be) && (be.StatusCode == http.StatusPreconditionFailed || be.StatusCode == http.StatusConflict) {
			continue // the order changed or the record exists: read again
		}
		return err == nil, err
	}
}

// confirmationQueued is an order's confirmation field once its
// confirmation is in the outbox.
const confirmationQueued = "queued"

// queueOwed queues the confirmations owed after a crash between a saga's
// completion and queueConfirmation: every paid saga order without one whose
// saga has completed (a saga still running is left to its executor). It
// returns how many it queued.
func (p *Purchases) queueOwed(ctx context.Context) (int, error) {
	pager := p.shop.tickets.NewQueryItemsPager(
		"SELECT c.sagaId FROM c WHERE c.type = 'order' AND c.strategy = @s AND c.status = 'paid' AND NOT IS_DEFINED(c.confirmation)",
		azcosmos.NewPartitionKey(), &azcosmos.QueryOptions{QueryParameters: []azcosmos.QueryParameter{{Name: "@s", Value: sagaStrategy}}})
	n := 0
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return n, err
		}
		for _, raw := range page.Items {
			var o struct {
				SagaID string `json:"sagaId"`
			}
			if json.Unmarshal(raw, &o) != nil || o.SagaID == "" {
				continue
			}
			st, err := p.exec.Get(ctx, o.SagaID)
			if errors.Is(err, saga.ErrNotFound) {
				continue // not this executor's saga
			}
			if err != nil {
				return n, err
			}
			if st.Status != coord.SagaCompleted {
				continue
			}
			var in PurchaseInput
			if err := json.Unmarshal(st.Input, &in); err != nil {
				return n, err
			}
			queued, err := p.queueConfirmation(ctx, st.ID, in)
			if err != nil {
				return n, err
			}
			if queued {
				n++
			}
		}
	}
	return n, nil
}

// SagaResult is a purchase saga's end as the page shows it.
type SagaResult struct {
	Input  PurchaseInput
	State  saga.State
	Steps  []SagaStep
	Failed string
	// Undone says what each compensation did, in the order they ran.
	Undone []Undo
	// Confirmation is the confirmation's state once the saga completed.
	Confirmation Confirmation
}

// SagaStep is one step's fate.
type SagaStep struct {
	Name        string
	Title       string
	Done        bool
	Failed      bool
	Compensated bool
}

// Undo is one compensation: the step it undid and, in words, what it found
// and did.
type Undo struct {
	Step  string
	Title string
	Said  string
}

// Confirmation is where a completed purchase's confirmation stands.
type Confirmation struct {
	Queued        bool   // in the outbox, committed with the order's mark
	MessagingDown bool   // so it waits there
	Error         string // it could not be queued yet: the recoverer will
}

// Completed reports whether the purchase went through.
func (r SagaResult) Completed() bool { return r.State.Status == coord.SagaCompleted }

// result describes a saga's recorded state for the page: each step's fate
// and, read back from the participants' own records, what each compensation
// did.
func (p *Purchases) result(ctx context.Context, in PurchaseInput, st saga.State) SagaResult {
	r := SagaResult{Input: in, State: st, Failed: stepTitle(st.FailedStep)}
	done := map[string]bool{}
	for _, s := range st.Completed {
		done[s] = true
	}
	comp := map[string]bool{}
	for _, s := range st.Compensated {
		comp[s] = true
	}
	for _, name := range sagaSteps {
		r.Steps = append(r.Steps, SagaStep{Name: name, Title: stepTitle(name), Done: done[name],
			Failed: st.FailedStep == name, Compensated: comp[name]})
	}
	for _, name := range st.Compensated {
		r.Undone = append(r.Undone, Undo{Step: name, Title: undoTitle(name), Said: p.explainUndo(ctx, name, st.ID, in)})
	}
	if r.Completed() {
		o, _, err := p.order(ctx, in.EventID, st.ID)
		r.Confirmation = Confirmation{Queued: err == nil && o.Confirmation == confirmationQueued,
			MessagingDown: p.switches.MessagingDown.Load()}
	}
	return r
}

// explainUndo says what a step's compensation did, from the record the
// participant kept: a compensation is a decision (nothing to refund, a
// charge cancelled before it arrived, a ticket revoked), not a rollback.
func (p *Purchases) explainUndo(ctx context.Context, step, sagaID string, in PurchaseInput) string {
	switch step {
	case stepHold:
		var released, never []string
		for _, code := range in.Seats {
			seat, _, err := p.shop.readSeat(ctx, in.EventID, code)
			if err != nil {
				return "Released the seats this purchase held (they could not be read back: " + plainError(err) + ")."
			}
			if seat.ReleasedBy == sagaID {
				released = append(released, seatName(code))
			} else {
				never = append(never, seatName(code))
			}
		}
		switch {
		case len(never) == 0:
			return "Released " + strings.Join(released, ", ") + ": back on sale."
		case len(released) == 0:
			return "This purchase never held " + strings.Join(never, ", ") + " (another buyer had it), so there was nothing to release and the other buyer's hold was left alone."
		}
		return "Released " + strings.Join(released, ", ") + "; " + strings.Join(never, ", ") + " had not been held by this purchase and was left alone."
	case stepCharge:
		ch, err := p.charge(ctx, in.UserID, "charge-"+sagaID)
		if err != nil {
			return "Refunded the card if it was charged (the payment could not be read back: " + plainError(err) + ")."
		}
		switch ch.Status {
		case "declined":
			return "The card had been declined, so nothing had been charged: the refund was a no-op."
		case "cancelled":
			return "No charge had reached the payment provider, so the refund recorded the charge as cancelled: a late charge with this purchase's key is refused."
		case "refunded":
			return fmt.Sprintf("Refunded $%d to %s's card.", ch.Amount, userName(in.UserID))
		}
		return "The charge is " + ch.Status + "."
	case stepIssue:
		o, _, err := p.order(ctx, in.EventID, sagaID)
		if err != nil {
			return "Revoked the tickets if any were issued (the order could not be read back: " + plainError(err) + ")."
		}
		switch o.Status {
		case "cancelled":
			return "No ticket had been issued, so the revoke recorded the order as cancelled: a late issue is refused."
		case "refunded":
			return "Revoked the ticket for " + seatList(in.Seats) + " and marked the order refunded."
		}
		return "The order is " + o.Status + "."
	}
	return ""
}

// stepTitle names a step for people.
func stepTitle(name string) string {
	switch name {
	case stepHold:
		return "Hold seats"
	case stepCharge:
		return "Charge card"
	case stepIssue:
		return "Issue tickets"
	}
	return name
}

// undoTitle names a step's compensation.
func undoTitle(name string) string {
	switch name {
	case stepHold:
		return "Release seats"
	case stepCharge:
		return "Refund card"
	case stepIssue:
		return "Revoke tickets"
	}
	return ""
}

// recoverOnce resumes the purchases an executor left unfinished (it
// crashed, or the process was stopped mid-purchase): each continues from
// its recorded step, to completion or full compensation. Purchases a live
// executor is driving are skipped. Then it queues the confirmations that
// completed purchases still owe. It returns how many purchases and
// confirmations it settled.
func (p *Purchases) recoverOnce(ctx context.Context) (int, error) {
	ids, err := p.exec.Unfinished(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		if _, err := p.exec.TryResume(ctx, id); errors.Is(err, saga.ErrBusy) {
			continue
		} else if err != nil {
			return n, err
		}
		n++
	}
	q, err := p.queueOwed(ctx)
	return n + q, err
}

// recoverLoop runs recoverOnce now and then every interval until ctx ends.
func (p *Purchases) recoverLoop(ctx context.Context, every time.Duration, log *slog.Logger) {
	for {
		if n, err := p.recoverOnce(ctx); err != nil && ctx.Err() == nil {
			log.Warn("recovering purchases", "error", err)
		} else if n > 0 {
			log.Info("settled purchases left unfinished", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}
