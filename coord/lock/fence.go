package lock

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// FenceField is the field of a protected item that holds the highest
// fencing token it has accepted.
const FenceField = "fence"

// ErrFenced means a write was rejected because the protected item has
// already accepted a write with a newer fencing token: the writer's lock
// was lost and someone else has held it since.
var ErrFenced = errors.New("lock: fenced out by a newer token")

// FencedPatch applies ops to a protected item only if the item has accepted
// no write with a token newer than token, and records token in the item's
// FenceField, in one conditional patch the database evaluates atomically.
// Writes carrying the same token as the last accepted one pass, so a holder
// may write several times in its critical section. It returns ErrFenced
// (wrapped) when a newer token got there first; any condition already set
// on ops is replaced. The item must exist.
func FencedPatch(ctx context.Context, c *azcosmos.ContainerClient, pk azcosmos.PartitionKey, id string, token int64, ops azcosmos.PatchOperations) (azcosmos.ItemResponse, error) {
	ops.AppendSet("/"+FenceField, token)
	ops.SetCondition(fmt.Sprintf("FROM c WHERE NOT IS_DEFINED(c.%s) OR c.%s <= %d", FenceField, FenceField, token))
	r, err := c.PatchItem(ctx, pk, id, ops, nil)
	if statusOf(err) == http.StatusPreconditionFailed {
		return r, fmt.Errorf("%w: %q rejected token %d", ErrFenced, id, token)
	}
	return r, err
}
