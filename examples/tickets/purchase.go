package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord/inbox"
	"github.com/orrery-db/orrery/coord/lock"
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

// The purchase saga's steps, in order.
const (
	stepHold    = "hold-seats"
	stepCharge  = "charge-card"
	stepIssue   = "issue-tickets"
	stepConfirm = "send-confirmation"
)

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
// the tickets, send the confirmation. The participants are separate
// services (the seat inventory, the payment provider, the ticketing system,
// messaging), so no transaction spans them: coord/saga records each step
// and, when one fails, runs the compensations of those done, in reverse.
type Purchases struct {
	shop     *Shop
	payments *azcosmos.ContainerClient
	notes    *azcosmos.ContainerClient
	inbox    *inbox.Inbox
	switches *Switches
	exec     *saga.Executor
}

// newPurchases wires the saga's steps to its participants.
func newPurchases(ctx context.Context, shop *Shop, sagas, payments, notes *azcosmos.ContainerClient, locks *lock.Locker, sw *Switches) (*Purchases, error) {
	confirmations, err := inbox.New(ctx, notes, "confirmations", nil)
	if err != nil {
		return nil, err
	}
	p := &Purchases{shop: shop, payments: payments, notes: notes, switches: sw, inbox: confirmations}
	exec, err := saga.New(sagas, "purchase", []saga.Step{
		{Name: stepHold, Action: noOutput(p.holdSeats), Compensate: p.releaseSeats},
		{Name: stepCharge, Action: noOutput(p.chargeCard), Compensate: p.refundCard},
		{Name: stepIssue, Action: noOutput(p.issueTickets), Compensate: p.revokeTickets},
		{Name: stepConfirm, Action: noOutput(p.sendConfirmation)}, // a sent message cannot be unsent
	}, locks, &saga.Options{Retry: saga.RetryPolicy{Attempts: 1}, CompensationRetry: saga.RetryPolicy{Backoff: 50 * time.Millisecond}})
	p.exec = exec
	return p, err
}

// noOutput is an action that records no output.
func noOutput(f func(context.Context, saga.Call) error) saga.Action {
	return func(ctx context.Context, c saga.Call) (any, error) { return nil, f(ctx, c) }
}

// Buy runs one purchase to its end: completed, or compensated.
func (p *Purchases) Buy(ctx context.Context, in PurchaseInput) (saga.State, error) {
	return p.exec.Start(ctx, saga.NewID(), in)
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
		Seats: in.Seats, Total: in.Total, Strategy: "purchase saga", Status: "paid", Created: time.Now().UTC()}), nil)
	for _, code := range in.Seats {
		b.CreateItem(mustJSON(Ticket{ID: "ticket-" + c.SagaID + "-" + code, Type: typeTicket, EventID: in.EventID, Seat: code,
			OwnerID: in.UserID, OrderID: orderOf(c.SagaID), Status: "active", Created: time.Now().UTC()}), nil)
		b.PatchItem(seatID(code), soldPatch(in.UserID, c.SagaID), nil)
	}
	err = p.shop.execute(ctx, b)
	if batchStatus(err) == http.StatusConflict {
		o, rerr := p.order(ctx, in.EventID, c.SagaID)
		if rerr == nil && o.Status == "paid" {
			return nil // a retry: already issued
		}
		return errors.New("the order was cancelled before the tickets were issued")
	}
	return err
}

// order reads a saga's order.
func (p *Purchases) order(ctx context.Context, eventID, sagaID string) (Order, error) {
	resp, err := p.shop.tickets.ReadItem(ctx, azcosmos.NewPartitionKeyString(eventID), orderOf(sagaID), nil)
	if err != nil {
		return Order{}, err
	}
	var o Order
	err = json.Unmarshal(resp.Value, &o)
	return o, err
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
		Seats: in.Seats, Total: in.Total, Strategy: "purchase saga", Status: "cancelled", Created: time.Now().UTC()}
	err = p.shop.create(ctx, in.EventID, cancelled)
	if !isStatus(err, http.StatusConflict) {
		return err
	}
	o, err := p.order(ctx, in.EventID, c.SagaID)
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

// sendConfirmation tells the buyer, once per saga (coord/inbox keyed by the
// step's key). The messaging switch makes it fail.
func (p *Purchases) sendConfirmation(ctx context.Context, c saga.Call) error {
	if p.switches.MessagingDown.Load() {
		return errMessagingDown
	}
	in, err := input(c)
	if err != nil {
		return err
	}
	text := fmt.Sprintf("Your tickets for %s are confirmed: %s, $%d.", in.Event, seatList(in.Seats), in.Total)
	_, err = p.inbox.Handle(ctx, in.UserID, c.Key, func(ctx context.Context, b *azcosmos.TransactionalBatch) error {
		b.CreateItem(mustJSON(Notification{ID: "note-" + c.SagaID, UserID: in.UserID, Text: text, MessageID: c.Key, Delivered: time.Now().UTC()}), nil)
		return nil
	})
	return err
}

// SagaResult is a purchase saga's end as the page shows it.
type SagaResult struct {
	Input  PurchaseInput
	State  saga.State
	Steps  []SagaStep
	Failed string
}

// SagaStep is one step's fate.
type SagaStep struct {
	Name        string
	Title       string
	Done        bool
	Failed      bool
	Compensated bool
	Undo        string // what its compensation did
}

// Completed reports whether the purchase went through.
func (r SagaResult) Completed() bool { return r.State.Status == saga.Completed }

// Compensations lists what was undone, in the order it was undone.
func (r SagaResult) Compensations() []string {
	var out []string
	for _, name := range r.State.Compensated {
		out = append(out, undoTitle(name))
	}
	return out
}

// sagaResult describes a saga's recorded state for the page.
func sagaResult(in PurchaseInput, st saga.State) SagaResult {
	r := SagaResult{Input: in, State: st, Failed: stepTitle(st.FailedStep)}
	done := map[string]bool{}
	for _, s := range st.Completed {
		done[s] = true
	}
	comp := map[string]bool{}
	for _, s := range st.Compensated {
		comp[s] = true
	}
	for _, name := range []string{stepHold, stepCharge, stepIssue, stepConfirm} {
		r.Steps = append(r.Steps, SagaStep{Name: name, Title: stepTitle(name), Done: done[name],
			Failed: st.FailedStep == name, Compensated: comp[name], Undo: undoTitle(name)})
	}
	return r
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
	case stepConfirm:
		return "Send confirmation"
	}
	return name
}

// undoTitle names what a step's compensation does.
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
// executor is driving are skipped. It returns how many it finished.
func (p *Purchases) recoverOnce(ctx context.Context) (int, error) {
	unfinished, err := p.exec.Unfinished(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, st := range unfinished {
		if st.Status == saga.CompensationFailed {
			continue // left to an operator, as before
		}
		if _, err := p.exec.TryResume(ctx, st.ID); errors.Is(err, saga.ErrBusy) {
			continue
		} else if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// recoverLoop runs recoverOnce now and then every interval until ctx ends.
func (p *Purchases) recoverLoop(ctx context.Context, every time.Duration, log *slog.Logger) {
	for {
		if n, err := p.recoverOnce(ctx); err != nil && ctx.Err() == nil {
			log.Warn("recovering purchases", "error", err)
		} else if n > 0 {
			log.Info("recovered unfinished purchases", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}
