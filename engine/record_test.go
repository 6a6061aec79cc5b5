package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine/internal/rids"
)

// TestETagIsTheFormattedWrite: the ETag written without fmt is the one the
// format "%08x-%04x-%04x-0000-%012x" gives, at the bounds of every field.
func TestETagIsTheFormattedWrite(t *testing.T) {
	for _, it := range []storedItem{
		{},
		{lsn: 1, rid: 1, write: 1},
		{lsn: 0x0123456789abcdef, rid: 0xfedcba9876543210, write: 0xbeef},
		{lsn: ^uint64(0), rid: ^uint64(0), write: ^uint16(0)},
	} {
		want := fmt.Sprintf("\"%08x-%04x-%04x-0000-%012x\"", uint32(it.lsn>>32), uint16(it.rid), it.write, it.lsn&0xFFFFFFFFFFFF)
		if got := it.etag(); got != want {
			t.Errorf("etag %s, want %s", got, want)
		}
	}
}

// TestItemSystemPropertiesAreTheirParts: a written item's _rid, _self,
// _etag and _ts are its RID, its container's link with its RID, its ETag
// and its timestamp, as the response's ETag says.
func TestItemSystemPropertiesAreTheirParts(t *testing.T) {
	e := openTestEngine(t, newTestStore(t))
	ctx := t.Context()
	c, err := e.Container(ctx, "db", "c")
	if err != nil {
		t.Fatal(err)
	}
	for i, write := range []func(*ItemRequest) (*ItemResult, error){
		func(r *ItemRequest) (*ItemResult, error) { return e.CreateItem(ctx, r) },
		func(r *ItemRequest) (*ItemResult, error) { return e.ReplaceItem(ctx, r) },
	} {
		res, err := write(opsItem(7))
		if err != nil {
			t.Fatal(i, err)
		}
		var doc map[string]any
		if err := json.Unmarshal(res.Body, &doc); err != nil {
			t.Fatal(err)
		}
		rid, _ := doc["_rid"].(string)
		if b, ok := rids.Decode(rid, 16); !ok || !bytes.Equal(b[:len(c.rid)], c.rid) {
			t.Errorf("_rid %q is not an item RID of the container", rid)
		}
		if want := c.Self() + "docs/" + rid + "/"; doc["_self"] != want {
			t.Errorf("_self %v, want %s", doc["_self"], want)
		}
		if doc["_etag"] != res.ETag || len(res.ETag) != etagLen {
			t.Errorf("_etag %v, the response's ETag %s", doc["_etag"], res.ETag)
		}
		if ts, _ := doc["_ts"].(float64); ts < float64(time.Now().Add(-time.Hour).Unix()) {
			t.Errorf("_ts %v", doc["_ts"])
		}
		if doc["_attachments"] != "attachments/" || doc["payload"] != benchPayload[:200] {
			t.Errorf("the document is %s", res.Body)
		}
	}
}
