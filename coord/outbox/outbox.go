package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord/internal/pkey"
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
	// PartitionKey is the value of the logical partition the message was
	// written in, as given to Add: a string, number, bool or nil, or for a
	// hierarchical key a []any of them (one per path). After a trip
	// through JSON numbers are float64. Messages of one partition key are
	// published in the order written.
	PartitionKey any `json:"partitionKey"`
}

// Key is the message's partition key as a string, for publishers that order
// or route by a string key (a session id, a Kafka key): a string key
// itself, any other key as its JSON text.
func (m Message) Key() string {
	if s, ok := m.PartitionKey.(string); ok {
		return s
	}
	b, _ := json.Marshal(m.PartitionKey)
	return string(b)
}

// record is an outbox document: the message, in the business document's
// partition, marked sent (or dead-lettered) by the relay.
type record struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Message
	Created      time.Time `json:"createdAt"`
	SentAt       string    `json:"sentAt,omitempty"`
	DeadLettered string    `json:"deadLetteredAt,omitempty"`
	TTL          *int      `json:"ttl,omitempty"`
}

// recordFields are the top-level properties of a record, which a partition
// key path must not name (but "partitionKey" itself for a one-path key).
var recordFields = []string{"id", "kind", "messageId", "topic", "payload", "createdAt", "sentAt", "deadLetteredAt", "ttl"}

// recordID is the document id of a message's outbox record.
func recordID(messageID string) string { return "outbox:" + messageID }

// Outbox adds outgoing messages to transactional batches, so they commit
// or fail with the business writes they describe.
type Outbox struct {
	paths []string
}

// New returns an outbox for the container c: it reads c's partition key
// definition, so outbox records carry their partition key at the same
// paths as the business documents, whatever they are (a nested path, a
// number, a hierarchical key). A container partitioned by /id cannot hold
// an outbox (a record and the document it describes would need the same
// id), nor one whose partition key is a property of the record itself.
func New(ctx context.Context, c *azcosmos.ContainerClient) (*Outbox, error) {
	props, err := c.Read(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("outbox: reading container %q: %w", c.ID(), err)
	}
	paths, err := pkey.Paths(*props.ContainerProperties)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	for _, p := range paths {
		top := pkey.Top(p)
		if slices.Contains(recordFields, top) || (top == "partitionKey" && len(paths) > 1) {
			return nil, fmt.Errorf("outbox: container %q is partitioned by %s, a property of the outbox's own records", c.ID(), p)
		}
	}
	return &Outbox{paths: paths}, nil
}

// Add appends the creation of each message's outbox record to b, a batch
// for the logical partition whose value is key: a string, number, bool or
// nil, or for a hierarchical partition key a []any with one value per
// path, as the batch's azcosmos.PartitionKey was made from. Execute the
// batch with ExecuteTransactionalBatch (coord.Committed tells whether it
// committed): if any operation fails, no record is written.
func (o *Outbox) Add(b *azcosmos.TransactionalBatch, key any, msgs ...Message) error {
	values, err := pkey.Values(key, len(o.paths))
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	for _, m := range msgs {
		if m.ID == "" {
			return errors.New("outbox: a message needs an ID")
		}
		m.PartitionKey = key
		doc, err := json.Marshal(record{ID: recordID(m.ID), Kind: Kind, Message: m, Created: time.Now().UTC()})
		if err != nil {
			return err
		}
		var obj map[string]any
		if err := json.Unmarshal(doc, &obj); err != nil {
			return err
		}
		if err := pkey.Set(obj, o.paths, values); err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
		if doc, err = json.Marshal(obj); err != nil {
			return err
		}
		b.CreateItem(doc, nil)
	}
	return nil
}

// partitionKey is the SDK's partition key of a record's message.
func (m Message) partitionKey() (azcosmos.PartitionKey, error) {
	n := 1
	if vs, ok := m.PartitionKey.([]any); ok {
		n = len(vs)
	}
	values, err := pkey.Values(m.PartitionKey, n)
	if err != nil {
		return azcosmos.PartitionKey{}, err
	}
	return pkey.PartitionKey(values), nil
}
