// Package inbox makes a message handler take effect once per message id
// although messages arrive at least once (coord/outbox publishes each
// message one or more times).
//
// The inbox writes a marker document per handled message, with the
// create-only id "inbox:<consumer>:<message id>": a second creation fails
// with 409 Conflict, which is how a redelivery is recognized.
//
//   - When the handler's own writes are in one logical partition, Handle puts
//     the marker in the same transactional batch: the effect and the marker
//     commit together or not at all, so the effect happens exactly once
//     whatever crashes, and a redelivery does nothing.
//   - When the effect is elsewhere (another partition, another service),
//     HandleExternal runs the handler and then writes the marker. A crash
//     between the two runs the handler again on redelivery, so that handler
//     must itself be idempotent by message id (a create-only write, a
//     request with an idempotency key); the marker then only saves the
//     repeat.
package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// Inbox records the messages one consumer has handled, in container c.
type Inbox struct {
	c          *azcosmos.ContainerClient
	consumer   string
	pkProperty string
	// TTL, when positive, expires markers after that many seconds (the
	// container needs TTL enabled); keep it longer than any redelivery.
	TTL int
}

// New returns the inbox of the named consumer in c, a container partitioned
// by "/" + pkProperty (a top-level string property).
func New(c *azcosmos.ContainerClient, consumer, pkProperty string) *Inbox {
	return &Inbox{c: c, consumer: consumer, pkProperty: pkProperty}
}

// MarkerID is the id of the marker of a handled message.
func (in *Inbox) MarkerID(messageID string) string { return "inbox:" + in.consumer + ":" + messageID }

func (in *Inbox) marker(pk, messageID string) ([]byte, error) {
	doc := map[string]any{"id": in.MarkerID(messageID), in.pkProperty: pk, "kind": "coord.inbox",
		"consumer": in.consumer, "messageId": messageID, "handledAt": time.Now().UTC().Format(time.RFC3339Nano)}
	if in.TTL > 0 {
		doc["ttl"] = in.TTL
	}
	return json.Marshal(doc)
}

// ErrFailed wraps the status of a batch operation that failed.
var ErrFailed = errors.New("inbox: the batch did not commit")

// Handle handles a message whose effects are writes in the logical
// partition pk of the inbox's container: fn adds them to b, and Handle adds
// the marker and commits the batch. It reports false, with no error and
// nothing written, when the message was handled before.
func (in *Inbox) Handle(ctx context.Context, pk, messageID string, fn func(ctx context.Context, b *azcosmos.TransactionalBatch) error) (bool, error) {
	b := in.c.NewTransactionalBatch(azcosmos.NewPartitionKeyString(pk))
	mk, err := in.marker(pk, messageID)
	if err != nil {
		return false, err
	}
	// The marker goes first: a redelivery fails on it before anything else.
	b.CreateItem(mk, nil)
	if err := fn(ctx, &b); err != nil {
		return false, err
	}
	resp, err := in.c.ExecuteTransactionalBatch(ctx, b, nil)
	if err != nil {
		return false, err
	}
	if resp.Success {
		return true, nil
	}
	if len(resp.OperationResults) > 0 && resp.OperationResults[0].StatusCode == http.StatusConflict {
		return false, nil
	}
	for i, r := range resp.OperationResults {
		if r.StatusCode >= 300 && r.StatusCode != http.StatusFailedDependency {
			return false, fmt.Errorf("%w: operation %d answered %d", ErrFailed, i, r.StatusCode)
		}
	}
	return false, ErrFailed
}

// Handled reports whether the message has a marker in partition pk.
func (in *Inbox) Handled(ctx context.Context, pk, messageID string) (bool, error) {
	_, err := in.c.ReadItem(ctx, azcosmos.NewPartitionKeyString(pk), in.MarkerID(messageID), nil)
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
		return false, nil
	}
	return err == nil, err
}

// HandleExternal handles a message whose effect is outside the inbox's
// partition: it skips a message already marked, runs fn, then writes the
// marker in partition pk. fn must be idempotent by message id (see the
// package documentation). It reports whether fn ran.
func (in *Inbox) HandleExternal(ctx context.Context, pk, messageID string, fn func(ctx context.Context) error) (bool, error) {
	done, err := in.Handled(ctx, pk, messageID)
	if err != nil || done {
		return false, err
	}
	if err := fn(ctx); err != nil {
		return false, err
	}
	mk, err := in.marker(pk, messageID)
	if err != nil {
		return true, err
	}
	_, err = in.c.CreateItem(ctx, azcosmos.NewPartitionKeyString(pk), mk, nil)
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusConflict {
		err = nil // a concurrent delivery marked it first
	}
	return true, err
}
