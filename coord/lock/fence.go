package lock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// FencesField is the property of a protected item that holds, per lock
// name, the highest fencing token the item has accepted:
// {"fences": {"seat-map": 7, "concert-42": 3}}. It belongs to the fenced
// writes: they overwrite whatever a body gives it with the stored map plus
// their own token. (Before coord 0.2 the token was a single "fence" number,
// which this version neither reads nor writes.)
const FencesField = "fences"

// ErrFenced means a fenced write was rejected because the protected item
// has already accepted a write with a newer fencing token for the same lock
// name: the writer's lock was lost and someone else has held it since.
var ErrFenced = errors.New("lock: fenced out by a newer token")

// maxFenceAttempts bounds the read-check-write rounds of one fenced write:
// each round that is refused is refused because the item changed between
// its read and its write, which a holder's own writes do not race with.
const maxFenceAttempts = 10

// Fence is what a fenced write carries: the lock's name and the token of
// the acquisition the writer holds (Lock.Fence).
type Fence struct {
	// Name is the lock's name: the key of the token in FencesField.
	Name string
	// Token is the acquisition's fencing token.
	Token int64
}

func (f Fence) check() error {
	if err := checkName(f.Name); err != nil {
		return err
	}
	if f.Token <= 0 {
		return fmt.Errorf("lock: fence %q has token %d; tokens start at 1", f.Name, f.Token)
	}
	return nil
}

// fenced is the error of a write refused by the item's newer token.
func (f Fence) fenced(id string, accepted int64) error {
	return fmt.Errorf("%w: item %q has accepted token %d of %q, newer than %d", ErrFenced, id, accepted, f.Name, f.Token)
}

// stored is what a protected item holds of the fences: its map (nil when it
// has none) and the token accepted for one name (0 when none).
type stored struct {
	fences map[string]json.RawMessage
	token  int64
}

func storedFences(item []byte, name string) (stored, error) {
	var doc struct {
		Fences json.RawMessage `json:"fences"`
	}
	if err := json.Unmarshal(item, &doc); err != nil {
		return stored{}, fmt.Errorf("lock: decoding a protected item: %w", err)
	}
	var s stored
	if len(doc.Fences) == 0 || doc.Fences[0] != '{' {
		return s, nil // no map (absent, null, or not an object)
	}
	if err := json.Unmarshal(doc.Fences, &s.fences); err != nil {
		return stored{}, fmt.Errorf("lock: decoding the %s of a protected item: %w", FencesField, err)
	}
	if raw, ok := s.fences[name]; ok {
		var t float64
		if json.Unmarshal(raw, &t) == nil {
			s.token = int64(t)
		}
	}
	return s, nil
}

// withFence returns the item body with its FencesField set to the stored
// map plus f's token, and the item's id.
func withFence(item []byte, s stored, f Fence) ([]byte, string, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(item, &doc); err != nil {
		return nil, "", fmt.Errorf("lock: a fenced write needs a JSON object: %w", err)
	}
	var id string
	if raw, ok := doc["id"]; !ok || json.Unmarshal(raw, &id) != nil || id == "" {
		return nil, "", errors.New(`lock: a fenced write needs an item with a string "id"`)
	}
	fences := map[string]json.RawMessage{}
	for k, v := range s.fences {
		fences[k] = v
	}
	fences[f.Name] = json.RawMessage(fmt.Sprint(f.Token))
	b, err := json.Marshal(fences)
	if err != nil {
		return nil, "", err
	}
	doc[FencesField] = b
	out, err := json.Marshal(doc)
	return out, id, err
}

// fencePath is the patch path of a name's entry in the fences map (a JSON
// pointer: "~" is written "~0"; names cannot hold "/").
func fencePath(name string) string {
	return "/" + FencesField + "/" + strings.ReplaceAll(name, "~", "~0")
}

// sqlString is a lock name as a string literal of the query language.
// Names hold no quote, backslash or control character (checkName): the SDK
// sends a patch condition without escaping it for JSON.
func sqlString(name string) string { return "'" + name + "'" }

// FencedPatch applies ops to a protected item only if the item has accepted
// no write with a token newer than f's for f's lock name, and records f's
// token in the item's FencesField, in one conditional patch the database
// evaluates atomically. Writes carrying the same token as the last accepted
// one pass, so a holder may write several times in its critical section.
// It returns ErrFenced (wrapped) when a newer token got there first. Any
// condition already set on ops is replaced. The item must exist (404
// otherwise); on an item that has no FencesField map yet, the first fenced
// patch costs two more requests (a read and the patch that creates the
// map).
func FencedPatch(ctx context.Context, c *azcosmos.ContainerClient, pk azcosmos.PartitionKey, id string, f Fence, ops azcosmos.PatchOperations) (azcosmos.ItemResponse, error) {
	if err := f.check(); err != nil {
		return azcosmos.ItemResponse{}, err
	}
	entry := "c." + FencesField + "[" + sqlString(f.Name) + "]"
	for range maxFenceAttempts {
		p := ops
		p.AppendSet(fencePath(f.Name), f.Token)
		p.SetCondition(fmt.Sprintf("FROM c WHERE IS_OBJECT(c.%s) AND (NOT IS_DEFINED(%s) OR %s <= %d)", FencesField, entry, entry, f.Token))
		r, err := c.PatchItem(ctx, pk, id, p, nil)
		if statusOf(err) != http.StatusPreconditionFailed {
			return r, err
		}
		// Refused: a newer token, or no map to record ours in yet.
		cur, err := c.ReadItem(ctx, pk, id, nil)
		if err != nil {
			return azcosmos.ItemResponse{}, err
		}
		s, err := storedFences(cur.Value, f.Name)
		if err != nil {
			return azcosmos.ItemResponse{}, err
		}
		if s.token > f.Token {
			return azcosmos.ItemResponse{}, f.fenced(id, s.token)
		}
		if s.fences != nil {
			continue // the map appeared meanwhile: patch again
		}
		p = ops
		p.AppendSet("/"+FencesField, map[string]int64{f.Name: f.Token})
		p.SetCondition(fmt.Sprintf("FROM c WHERE NOT IS_OBJECT(c.%s)", FencesField))
		r, err = c.PatchItem(ctx, pk, id, p, nil)
		if statusOf(err) != http.StatusPreconditionFailed {
			return r, err
		}
	}
	return azcosmos.ItemResponse{}, fmt.Errorf("lock: fenced patch of %q: the item kept changing under %d attempts", id, maxFenceAttempts)
}

// FencedCreate creates a protected item with f's token recorded in its
// FencesField. An item that exists already is a 409 as for any create,
// unless it has accepted a newer token of f's lock name: then ErrFenced.
// Note that an item deleted by the successor (even by FencedDelete) carries
// no fence any more: a paused holder's late FencedCreate recreates it. Mark
// such items deleted with a fenced write instead of deleting them when that
// matters.
func FencedCreate(ctx context.Context, c *azcosmos.ContainerClient, pk azcosmos.PartitionKey, item []byte, f Fence) (azcosmos.ItemResponse, error) {
	if err := f.check(); err != nil {
		return azcosmos.ItemResponse{}, err
	}
	given, err := storedFences(item, f.Name)
	if err != nil {
		return azcosmos.ItemResponse{}, err
	}
	body, id, err := withFence(item, given, f)
	if err != nil {
		return azcosmos.ItemResponse{}, err
	}
	r, err := c.CreateItem(ctx, pk, body, nil)
	if statusOf(err) == http.StatusConflict {
		if cur, rerr := c.ReadItem(ctx, pk, id, nil); rerr == nil {
			if s, serr := storedFences(cur.Value, f.Name); serr == nil && s.token > f.Token {
				return r, f.fenced(id, s.token)
			}
		}
	}
	return r, err
}

// FencedReplace replaces a protected item with item if the item has
// accepted no newer token of f's lock name, recording f's token: it reads
// the item, checks its fence and replaces it conditionally on the ETag it
// read (two requests), so nothing can slip in between. The body's own
// FencesField is replaced by the stored map plus f's token: the other
// locks' entries are kept. It returns ErrFenced (wrapped) when a newer
// token got there first, and the read's 404 when the item does not exist.
func FencedReplace(ctx context.Context, c *azcosmos.ContainerClient, pk azcosmos.PartitionKey, id string, item []byte, f Fence) (azcosmos.ItemResponse, error) {
	return fencedWrite(ctx, c, pk, id, item, f, false)
}

// FencedUpsert creates item if absent or replaces it if present, as
// FencedCreate and FencedReplace do: an existing item is replaced only if
// it has accepted no newer token of f's lock name (ErrFenced otherwise).
func FencedUpsert(ctx context.Context, c *azcosmos.ContainerClient, pk azcosmos.PartitionKey, item []byte, f Fence) (azcosmos.ItemResponse, error) {
	var doc struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(item, &doc); err != nil || doc.ID == "" {
		return azcosmos.ItemResponse{}, errors.New(`lock: a fenced write needs a JSON object with a string "id"`)
	}
	return fencedWrite(ctx, c, pk, doc.ID, item, f, true)
}

// FencedDelete deletes a protected item if it has accepted no newer token
// of f's lock name (ErrFenced otherwise): a read, then a delete conditional
// on the ETag read. The item's fences go with it: see FencedCreate.
func FencedDelete(ctx context.Context, c *azcosmos.ContainerClient, pk azcosmos.PartitionKey, id string, f Fence) (azcosmos.ItemResponse, error) {
	return fencedWrite(ctx, c, pk, id, nil, f, false)
}

// fencedWrite reads the item, checks f against it and writes item (nil:
// deletes) conditionally on the ETag read; upsert creates an absent item.
func fencedWrite(ctx context.Context, c *azcosmos.ContainerClient, pk azcosmos.PartitionKey, id string, item []byte, f Fence, upsert bool) (azcosmos.ItemResponse, error) {
	if err := f.check(); err != nil {
		return azcosmos.ItemResponse{}, err
	}
	for range maxFenceAttempts {
		cur, err := c.ReadItem(ctx, pk, id, nil)
		if upsert && statusOf(err) == http.StatusNotFound {
			r, err := FencedCreate(ctx, c, pk, item, f)
			if statusOf(err) == http.StatusConflict {
				continue // created meanwhile: check its fence
			}
			return r, err
		}
		if err != nil {
			return azcosmos.ItemResponse{}, err
		}
		s, err := storedFences(cur.Value, f.Name)
		if err != nil {
			return azcosmos.ItemResponse{}, err
		}
		if s.token > f.Token {
			return azcosmos.ItemResponse{}, f.fenced(id, s.token)
		}
		etag := cur.ETag
		var r azcosmos.ItemResponse
		if item == nil {
			r, err = c.DeleteItem(ctx, pk, id, &azcosmos.ItemOptions{IfMatchEtag: &etag})
		} else {
			body, bodyID, berr := withFence(item, s, f)
			if berr != nil {
				return azcosmos.ItemResponse{}, berr
			}
			if bodyID != id {
				return azcosmos.ItemResponse{}, fmt.Errorf("lock: replacing item %q with a body whose id is %q", id, bodyID)
			}
			r, err = c.ReplaceItem(ctx, pk, id, body, &azcosmos.ItemOptions{IfMatchEtag: &etag})
		}
		if statusOf(err) == http.StatusPreconditionFailed {
			continue // changed since our read: read it again
		}
		return r, err
	}
	return azcosmos.ItemResponse{}, fmt.Errorf("lock: fenced write of %q: the item kept changing under %d attempts", id, maxFenceAttempts)
}
