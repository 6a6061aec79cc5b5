package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// Kind marks outbox records among a container's documents.
const Kind = "coord.outbox"

// Message is an outgoing message.
type Message struct {
	// ID identifies the message; consumers deduplicate by it (coord/inbox).
	ID string `json:"messageId"`
	// Topic says what the message is about; a Publisher may route by it.
	Topic string `json:"topic,omitempty"`
	// Payload is the message body, JSON.
	Payload json.RawMessage `json:"payload,omitempty"`
	// PartitionKey is the logical partition the message was written in;
	// messages of one partition key are published in the order written.
	PartitionKey string `json:"partitionKey"`
}

// record is an outbox document: the message, in the business document's
// partition, marked sent by the relay.
type record struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Message
	Created time.Time `json:"createdAt"`
	SentAt  string    `json:"sentAt,omitempty"`
	TTL     *int      `json:"ttl,omitempty"`
}

// recordID is the document id of a message's outbox record.
func recordID(messageID string) string { return "outbox:" + messageID }

// Outbox adds outgoing messages to transactional batches, so they commit
// or fail with the business writes they describe.
type Outbox struct {
	pkProperty string
}

// New returns an outbox for a container whose partition key path is
// "/" + pkProperty (a top-level string property).
func New(pkProperty string) *Outbox { return &Outbox{pkProperty: pkProperty} }

// Add appends the creation of each message's outbox record to b, a batch
// for the logical partition pk. Execute the batch with Commit (or
// ExecuteTransactionalBatch): if any operation fails, no record is written.
func (o *Outbox) Add(b *azcosmos.TransactionalBatch, pk string, msgs ...Message) error {
	for _, m := range msgs {
		if m.ID == "" {
			return errors.New("outbox: a message needs an ID")
		}
		m.PartitionKey = pk
		doc, err := json.Marshal(record{ID: recordID(m.ID), Kind: Kind, Message: m, Created: time.Now().UTC()})
		if err != nil {
			return err
		}
		var obj map[string]any
		if err := json.Unmarshal(doc, &obj); err != nil {
			return err
		}
		obj[o.pkProperty] = pk
		if doc, err = json.Marshal(obj); err != nil {
			return err
		}
		b.CreateItem(doc, nil)
	}
	return nil
}

// BatchError is a transactional batch that did not commit: nothing of it
// was written.
type BatchError struct {
	// Index is the operation that failed, StatusCode its status (409 for
	// an existing id, 412 for a stale ETag).
	Index      int
	StatusCode int32
}

// Error says which operation failed and how.
func (e *BatchError) Error() string {
	return fmt.Sprintf("outbox: the batch did not commit: operation %d failed with status %d", e.Index, e.StatusCode)
}

// Commit takes the results of ExecuteTransactionalBatch and returns a
// *BatchError when the batch rolled back, the transport error if any, or nil
// when it committed.
func Commit(resp azcosmos.TransactionalBatchResponse, err error) error {
	if err != nil {
		return err
	}
	if resp.Success {
		return nil
	}
	for i, r := range resp.OperationResults {
		if r.StatusCode != http.StatusFailedDependency && r.StatusCode >= 300 {
			return &BatchError{Index: i, StatusCode: r.StatusCode}
		}
	}
	return &BatchError{Index: -1}
}
