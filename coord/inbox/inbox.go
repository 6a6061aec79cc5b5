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

	"github.com/orrery-db/orrery/coord"
	"github.com/orrery-db/orrery/coord/internal/pkey"
)

// Kind marks inbox markers among a container's documents.
const Kind = "coord.inbox"

// Options tune an Inbox. The zero value (or nil) takes every default.
type Options struct {
	// TTL, when positive, expires markers after that many seconds (the
	// container needs TTL enabled); keep it longer than any redelivery can
	// come. Default: markers stay.
	TTL int
}

// Inbox records the messages one consumer has handled, in container c.
type Inbox struct {
	c        *azcosmos.ContainerClient
	consumer string
	paths    []string
	o        Options
}

// markerFields are the top-level properties of a marker, which a partition
// key path must not name.
var markerFields = []string{"id", "kind", "consumer", "messageId", "handledAt", "ttl"}

// New returns the inbox of the named consumer in c: it reads c's partition
// key definition, so markers carry their partition key at the same paths as
// the consumer's documents (a container partitioned by /id cannot hold
// markers next to other documents, nor one whose partition key is a
// property of the marker itself).
func New(ctx context.Context, c *azcosmos.ContainerClient, consumer string, opts *Options) (*Inbox, error) {
	if consumer == "" {
		return nil, errors.New("inbox: a consumer needs a name")
	}
	props, err := c.Read(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("inbox: reading container %q: %w", c.ID(), err)
	}
	paths, err := pkey.Paths(*props.ContainerProperties)
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	for _, p := range paths {
		for _, f := range markerFields {
			if pkey.Top(p) == f {
				return nil, fmt.Errorf("inbox: container %q is partitioned by %s, a property of the inbox's own markers", c.ID(), p)
			}
		}
	}
	in := &Inbox{c: c, consumer: consumer, paths: paths}
	if opts != nil {
		in.o = *opts
	}
	return in, nil
}

// MarkerID is the id of the marker of a handled message.
func (in *Inbox) MarkerID(messageID string) string { return "inbox:" + in.consumer + ":" + messageID }

// partition returns the values and the SDK's partition key of key.
func (in *Inbox) partition(key any) ([]any, azcosmos.PartitionKey, error) {
	values, err := pkey.Values(key, len(in.paths))
	if err != nil {
		return nil, azcosmos.PartitionKey{}, fmt.Errorf("inbox: %w", err)
	}
	return values, pkey.PartitionKey(values), nil
}

func (in *Inbox) marker(values []any, messageID string) ([]byte, error) {
	doc := map[string]any{"id": in.MarkerID(messageID), "kind": Kind,
		"consumer": in.consumer, "messageId": messageID, "handledAt": time.Now().UTC().Format(time.RFC3339Nano)}
	if in.o.TTL > 0 {
		doc["ttl"] = in.o.TTL
	}
	if err := pkey.Set(doc, in.paths, values); err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	return json.Marshal(doc)
}

// Handle handles a message whose effects are writes in one logical
// partition of the inbox's container, the one whose partition key value is
// key (a string, number, bool or nil, or a []any with one value per path
// for a hierarchical key): fn adds them to b, and Handle adds the marker
// and commits the batch. It reports false, with no error and nothing
// written, when the message was handled before; a batch that did not
// commit for another reason is a *coord.BatchError (the index counts the
// marker, which comes first, as 0).
func (in *Inbox) Handle(ctx context.Context, key any, messageID string, fn func(ctx context.Context, b *azcosmos.TransactionalBatch) error) (bool, error) {
	values, pk, err := in.partition(key)
	if err != nil {
		return false, err
	}
	b := in.c.NewTransactionalBatch(pk)
	mk, err := in.marker(values, messageID)
	if err != nil {
		return false, err
	}
	// The marker goes first: a redelivery fails on it before anything else.
	b.CreateItem(mk, nil)
	if err := fn(ctx, &b); err != nil {
		return false, err
	}
	resp, err := in.c.ExecuteTransactionalBatch(ctx, b, nil)
	if err := coord.Committed(resp, err); err != nil {
		var be *coord.BatchError
		if errors.As(err, &be) && be.Index == 0 && be.StatusCode == http.StatusConflict {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// Handled reports whether the message has a marker in the partition of
// key.
func (in *Inbox) Handled(ctx context.Context, key any, messageID string) (bool, error) {
	_, pk, err := in.partition(key)
	if err != nil {
		return false, err
	}
	_, err = in.c.ReadItem(ctx, pk, in.MarkerID(messageID), nil)
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
		return false, nil
	}
	return err == nil, err
}

// HandleExternal handles a message whose effect is outside the inbox's
// partition: it skips a message already marked, runs fn, then writes the
// marker in the partition of key. fn must be idempotent by message id (see
// the package documentation). It reports whether fn ran.
func (in *Inbox) HandleExternal(ctx context.Context, key any, messageID string, fn func(ctx context.Context) error) (bool, error) {
	values, pk, err := in.partition(key)
	if err != nil {
		return false, err
	}
	done, err := in.Handled(ctx, key, messageID)
	if err != nil || done {
		return false, err
	}
	if err := fn(ctx); err != nil {
		return false, err
	}
	mk, err := in.marker(values, messageID)
	if err != nil {
		return true, err
	}
	_, err = in.c.CreateItem(ctx, pk, mk, nil)
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusConflict {
		err = nil // a concurrent delivery marked it first
	}
	return true, err
}
