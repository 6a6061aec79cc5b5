package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord"
	"github.com/orrery-db/orrery/coord/inbox"
	"github.com/orrery-db/orrery/coord/outbox"
)

// Notification is a message delivered to a user's inbox page.
type Notification struct {
	ID        string    `json:"id"`
	UserID    string    `json:"userId"`
	Text      string    `json:"text"`
	MessageID string    `json:"messageId"`
	Delivered time.Time `json:"delivered"`
}

// notice is the payload of an outbox message: who is told what.
type notice struct {
	UserID string `json:"userId"`
	Text   string `json:"text"`
}

// errNotOwner means the ticket is not (or no longer) the sender's.
var errNotOwner = errors.New("this ticket is not yours to transfer")

// transferTicket gives a ticket to another user and queues a notification
// to each of them, in one transactional batch: the ownership change and the
// outbox records commit together, so the notifications cannot be lost even
// if messaging is down, and are not sent if the transfer fails.
func transferTicket(ctx context.Context, shop *Shop, ob *outbox.Outbox, eventName, eventID, ticketID, from, to string) error {
	resp, err := shop.tickets.ReadItem(ctx, azcosmos.NewPartitionKeyString(eventID), ticketID, nil)
	if err != nil {
		return err
	}
	var t Ticket
	if err := json.Unmarshal(resp.Value, &t); err != nil {
		return err
	}
	if t.OwnerID != from || t.Status != "active" {
		return errNotOwner
	}
	var move azcosmos.PatchOperations
	move.AppendSet("/ownerId", to)
	b := shop.tickets.NewTransactionalBatch(azcosmos.NewPartitionKeyString(eventID))
	b.PatchItem(ticketID, move, &azcosmos.TransactionalBatchItemOptions{IfMatchETag: &resp.ETag})
	seat := seatName(t.Seat)
	if err := ob.Add(&b, eventID,
		message("ticket.sent", notice{UserID: from, Text: fmt.Sprintf("You sent your %s ticket (%s) to %s.", eventName, seat, userName(to))}),
		message("ticket.received", notice{UserID: to, Text: fmt.Sprintf("%s sent you a ticket for %s: %s.", userName(from), eventName, seat)}),
	); err != nil {
		return err
	}
	err = coord.Committed(shop.tickets.ExecuteTransactionalBatch(ctx, b, nil))
	var be *coord.BatchError
	if errors.As(err, &be) && (be.StatusCode == http.StatusPreconditionFailed || be.StatusCode == http.StatusConflict) {
		return errNotOwner
	}
	return err
}

// transferDirect is the transfer without the outbox, for contrast: it
// saves the new owner, then calls the messaging service. If messaging is
// down (or the process dies between the two), the transfer stands and the
// notifications are gone: nothing recorded that they were owed. It returns
// how many notifications were lost.
func transferDirect(ctx context.Context, shop *Shop, m *Messenger, eventName, eventID, ticketID, from, to string) (int, error) {
	resp, err := shop.tickets.ReadItem(ctx, azcosmos.NewPartitionKeyString(eventID), ticketID, nil)
	if err != nil {
		return 0, err
	}
	var t Ticket
	if err := json.Unmarshal(resp.Value, &t); err != nil {
		return 0, err
	}
	if t.OwnerID != from || t.Status != "active" {
		return 0, errNotOwner
	}
	var move azcosmos.PatchOperations
	move.AppendSet("/ownerId", to)
	if _, err := shop.tickets.PatchItem(ctx, azcosmos.NewPartitionKeyString(eventID), ticketID, move,
		&azcosmos.ItemOptions{IfMatchEtag: &resp.ETag}); err != nil {
		if isStatus(err, http.StatusPreconditionFailed) {
			return 0, errNotOwner
		}
		return 0, err
	}
	seat := seatName(t.Seat)
	lost := 0
	for _, msg := range []outbox.Message{
		message("ticket.sent", notice{UserID: from, Text: fmt.Sprintf("You sent your %s ticket (%s) to %s.", eventName, seat, userName(to))}),
		message("ticket.received", notice{UserID: to, Text: fmt.Sprintf("%s sent you a ticket for %s: %s.", userName(from), eventName, seat)}),
	} {
		if err := m.Publish(ctx, msg); err != nil {
			lost++ // the dual write's gap: no record says this was owed
		}
	}
	return lost, nil
}

// message is an outbox message with a fresh id.
func message(topic string, n notice) outbox.Message {
	return outbox.Message{ID: newID("msg"), Topic: topic, Payload: mustJSON(n)}
}

// Messenger is the messaging service the outbox relay publishes to: it
// delivers a notice to the user's notifications, once per message id
// (coord/inbox) although the relay delivers at least once. The messaging
// switch makes it fail, as a mail provider that is down would.
type Messenger struct {
	notes    *azcosmos.ContainerClient
	inbox    *inbox.Inbox
	switches *Switches
}

// errMessagingDown is what Publish returns while messaging is switched off.
var errMessagingDown = errors.New("messaging is down")

// Publish delivers one message; the relay retries it with backoff until it
// succeeds.
func (m *Messenger) Publish(ctx context.Context, msg outbox.Message) error {
	if m.switches.MessagingDown.Load() {
		return errMessagingDown
	}
	var n notice
	if err := json.Unmarshal(msg.Payload, &n); err != nil {
		return nil // not a notice: nothing to deliver
	}
	_, err := m.inbox.Handle(ctx, n.UserID, msg.ID, func(ctx context.Context, b *azcosmos.TransactionalBatch) error {
		b.CreateItem(mustJSON(Notification{ID: "note-" + msg.ID, UserID: n.UserID, Text: n.Text,
			MessageID: msg.ID, Delivered: time.Now().UTC()}), nil)
		return nil
	})
	return err
}

// notifications lists a user's delivered notifications, newest first.
func notifications(ctx context.Context, notes *azcosmos.ContainerClient, userID string) ([]Notification, error) {
	return queryAll[Notification](ctx, notes, userID,
		"SELECT * FROM c WHERE IS_DEFINED(c.text) ORDER BY c.delivered DESC", nil)
}
