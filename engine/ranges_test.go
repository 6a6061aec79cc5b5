package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/pkey"
)

func TestInitialRangesCutTheKeySpaceEvenly(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	tests := []struct {
		throughput *Throughput
		want       string
	}{
		{nil, `[""-FF]`},
		{&Throughput{Manual: 400}, `[""-FF]`},
		{&Throughput{Manual: 10000}, `[""-FF]`},
		// Manual throughput above one range's 10,000 RU/s: ⌈RU/s ÷ 6,000⌉.
		{&Throughput{Manual: 12000}, `[""-20000000000000000000000000000000 20000000000000000000000000000000-FF]`},
		{&Throughput{Manual: 21000}, `[""-10000000000000000000000000000000 10000000000000000000000000000000-20000000000000000000000000000000 20000000000000000000000000000000-30000000000000000000000000000000 30000000000000000000000000000000-FF]`},
		{&Throughput{Manual: 40000}, `[""-09249249249249249249249249249249 09249249249249249249249249249249-12492492492492492492492492492492 12492492492492492492492492492492-1B6DB6DB6DB6DB6DB6DB6DB6DB6DB6DB 1B6DB6DB6DB6DB6DB6DB6DB6DB6DB6DB-24924924924924924924924924924924 24924924924924924924924924924924-2DB6DB6DB6DB6DB6DB6DB6DB6DB6DB6D 2DB6DB6DB6DB6DB6DB6DB6DB6DB6DB6D-36DB6DB6DB6DB6DB6DB6DB6DB6DB6DB6 36DB6DB6DB6DB6DB6DB6DB6DB6DB6DB6-FF]`},
		{&Throughput{AutoscaleMax: 20000}, `[""-20000000000000000000000000000000 20000000000000000000000000000000-FF]`},
		{&Throughput{AutoscaleMax: 30000}, `[""-15555555555555555555555555555555 15555555555555555555555555555555-2AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA 2AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA-FF]`},
	}
	for i, tt := range tests {
		id := fmt.Sprintf("c%d", i)
		if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"`+id+`","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}`), tt.throughput); err != nil {
			t.Fatal(err)
		}
		c, err := e.Container(ctx, "db", id)
		if err != nil {
			t.Fatal(err)
		}
		if got := describeRanges(c); got != tt.want {
			t.Errorf("throughput %+v: ranges %s, want %s", tt.throughput, got, tt.want)
		}
	}
}

func describeRanges(c *Container) string {
	ranges, _ := c.PartitionKeyRanges()
	parts := make([]string, len(ranges))
	for i, r := range ranges {
		lo := r.MinInclusive
		if lo == "" {
			lo = `""`
		}
		parts[i] = lo + "-" + r.MaxExclusive
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func TestSplitHalvesARangeAndRetiresIt(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"],"version":2}}`), &Throughput{Manual: 12000}); err != nil {
		t.Fatal(err)
	}
	children, err := e.SplitPartitionKeyRange(ctx, "db", "c", "1")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%s:%s-%s:%v %s:%s-%s:%v", children[0].ID, children[0].MinInclusive, children[0].MaxExclusive, children[0].Parents,
		children[1].ID, children[1].MinInclusive, children[1].MaxExclusive, children[1].Parents); got !=
		"2:20000000000000000000000000000000-30000000000000000000000000000000:[1] 3:30000000000000000000000000000000-FF:[1]" {
		t.Errorf("children %s", got)
	}
	c, _ := e.Container(ctx, "db", "c")
	if _, version := c.PartitionKeyRanges(); version != 2 {
		t.Errorf("range version %d after one split, want 2", version)
	}
	if c.HasPartitionKeyRange("1") || !c.HasPartitionKeyRange("2") || !c.HasPartitionKeyRange("0") {
		t.Errorf("current ranges after the split: %s", describeRanges(c))
	}
	// Replacing the container's properties keeps its ranges.
	if _, err := e.ReplaceContainer(ctx, "db", "c", []byte(`{"id":"c","partitionKey":{"paths":["/pk"],"version":2},"defaultTtl":60}`), ""); err != nil {
		t.Fatal(err)
	}
	if c, _ = e.Container(ctx, "db", "c"); describeRanges(c) != `[""-20000000000000000000000000000000 20000000000000000000000000000000-30000000000000000000000000000000 30000000000000000000000000000000-FF]` {
		t.Errorf("ranges after a replace: %s", describeRanges(c))
	}
	_, err = e.SplitPartitionKeyRange(ctx, "db", "c", "1")
	if e, ok := AsError(err); !ok || e.Status != 410 || e.SubStatus != SubStatusPartitionKeyRangeGone {
		t.Errorf("splitting the split range: %v, want 410/1002", err)
	}
	// Halving reaches a span too narrow to split.
	id := "0"
	for i := 0; ; i++ {
		ch, err := e.SplitPartitionKeyRange(ctx, "db", "c", id)
		if err != nil {
			if e, ok := AsError(err); !ok || e.Status != 400 || i < 120 {
				t.Fatalf("split %d: %v", i, err)
			}
			break
		}
		id = ch[0].ID
	}
	c, _ = e.Container(ctx, "db", "c")
	ranges, _ := c.PartitionKeyRanges()
	at := ""
	for _, r := range ranges {
		if r.MinInclusive != at {
			t.Fatalf("the ranges leave a gap or overlap at %q", at)
		}
		at = r.MaxExclusive
	}
	if at != "FF" {
		t.Fatalf("the ranges end at %q", at)
	}
}

func TestVersion1RangesAreCutInTheV1HashSpace(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"v1","partitionKey":{"paths":["/pk"],"version":1}}`), &Throughput{Manual: 21000}); err != nil {
		t.Fatal(err)
	}
	c, _ := e.Container(ctx, "db", "v1")
	// The service's boundaries for four V1 ranges: the hashes i·1073741823.
	if got := describeRanges(c); got != `[""-05C1CFFFFFFFF8 05C1CFFFFFFFF8-05C1DFFFFFFFF8 05C1DFFFFFFFF8-05C1E7FFFFFFFA 05C1E7FFFFFFFA-FF]` {
		t.Errorf("V1 container with 21,000 RU/s: %s", got)
	}
	// Items are placed by their V1 keys: "sample3" hashes to 867163591, in
	// the first range; "sample1" to 3951277692, in the last.
	for _, pk := range []string{"sample1", "sample3"} {
		if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: "v1", Body: []byte(`{"id":"` + pk + `","pk":"` + pk + `"}`), PartitionKey: StringKey(pk), HasPartitionKey: true}); err != nil {
			t.Fatal(err)
		}
	}
	for rangeID, want := range map[string]string{"0": "sample3", "1": "", "2": "", "3": "sample1"} {
		res, err := e.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: "v1", PartitionKeyRangeID: rangeID, MaxItems: 10})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, it := range res.Items {
			var doc struct{ ID string }
			_ = json.Unmarshal(it, &doc)
			ids = append(ids, doc.ID)
		}
		if strings.Join(ids, ",") != want {
			t.Errorf("change feed of range %s: %v, want %q", rangeID, ids, want)
		}
	}
	// Scoped to a partition key, a request reads that partition whichever
	// range it names (the SDKs' V1 hashes of some numbers differ).
	res, err := e.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: "v1", PartitionKeyRangeID: "0", PartitionKey: StringKey("sample1"), HasPartitionKey: true, MaxItems: 10})
	if err != nil || len(res.Items) != 1 {
		t.Errorf("change feed of sample1 through range 0: %v, %v", res, err)
	}
	// A V1 range splits at the middle hash of its span: range 3, from the
	// hash 3221225469 up, at 3758096382; "sample1" goes to the upper child.
	children, err := e.SplitPartitionKeyRange(ctx, "db", "v1", "3")
	if err != nil {
		t.Fatalf("splitting a V1 range: %v", err)
	}
	if cut := pkey.Hex(pkey.V1Boundary(3758096382)); len(children) != 2 || children[0].MaxExclusive != cut || children[1].MinInclusive != cut || children[1].MaxExclusive != "FF" {
		t.Fatalf("children of V1 range 3: %+v, want cut at %s", children, cut)
	}
	for i, want := range []int{0, 1} {
		res, err := e.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: "v1", PartitionKeyRangeID: children[i].ID, MaxItems: 10})
		if err != nil || len(res.Items) != want {
			t.Errorf("change feed of child %s: %v, %v, want %d items", children[i].ID, res, err, want)
		}
	}
}

// The service reads a partition key definition without a version as hash
// partitioning V1 and keeps it without one; only hierarchical keys, which
// exist only in V2, get version 2 filled in. The JavaScript SDK's suite
// relies on it: its bulk diagnostics case creates a container of
// 12,000 RU/s without a version and expects the keys "A" and 5 in two
// different ranges (they share one range in V2).
func TestAContainerWithoutAPartitionKeyVersionIsHashV1(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	res, err := e.CreateContainer(ctx, "db", []byte(`{"id":"nov","partitionKey":{"paths":["/key"]}}`), &Throughput{Manual: 12000})
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ PartitionKey map[string]any }
	_ = json.Unmarshal(res.Body, &body)
	if _, ok := body.PartitionKey["version"]; ok || body.PartitionKey["kind"] != "Hash" {
		t.Errorf("partitionKey of a container created without a version = %v, want kind Hash and no version", body.PartitionKey)
	}
	c, _ := e.Container(ctx, "db", "nov")
	if got := describeRanges(c); got != `[""-05C1DFFFFFFFFC 05C1DFFFFFFFFC-FF]` {
		t.Errorf("ranges of a container without a version at 12,000 RU/s: %s, want the V1 halves", got)
	}
	for _, doc := range []string{`{"id":"a","key":"A"}`, `{"id":"five","key":5}`} {
		var d struct{ Key any }
		_ = json.Unmarshal([]byte(doc), &d)
		pk, _ := ParsePartitionKeyHeader(map[bool]string{true: `["A"]`, false: `[5]`}[d.Key == "A"])
		if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: "nov", Body: []byte(doc), PartitionKey: pk, HasPartitionKey: true}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]string{}
	for _, rangeID := range []string{"0", "1"} {
		res, err := e.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: "nov", PartitionKeyRangeID: rangeID, MaxItems: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range res.Items {
			var doc struct{ ID string }
			_ = json.Unmarshal(it, &doc)
			got[doc.ID] = rangeID
		}
	}
	if len(got) != 2 || got["a"] == got["five"] {
		t.Errorf("ranges of the keys \"A\" and 5: %v, want two different ranges", got)
	}
	// A replace may name the version 1 the container has, not another.
	if _, err := e.ReplaceContainer(ctx, "db", "nov", []byte(`{"id":"nov","partitionKey":{"paths":["/key"],"kind":"Hash","version":1}}`), ""); err != nil {
		t.Errorf("replace naming version 1: %v", err)
	}
	if _, err := e.ReplaceContainer(ctx, "db", "nov", []byte(`{"id":"nov","partitionKey":{"paths":["/key"],"kind":"Hash","version":2}}`), ""); err == nil {
		t.Error("a replace turned a V1 container into V2")
	}
	// Hierarchical keys are V2 whether or not the body says so.
	res, err = e.CreateContainer(ctx, "db", []byte(`{"id":"hier","partitionKey":{"paths":["/a","/b"],"kind":"MultiHash"}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(res.Body, &body)
	if body.PartitionKey["version"] != float64(2) {
		t.Errorf("partitionKey of a hierarchical container = %v, want version 2", body.PartitionKey)
	}
}

// An aggregate over one range of a V1 container counts that range's items
// only: the SDKs run a cross-partition aggregate once per range and add the
// answers, so the ranges' counts must add up to the container's.
func TestAnAggregateOverAV1RangeCountsOnlyItsItems(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"p","partitionKey":{"paths":["/id"]}}`), &Throughput{Manual: 24000}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 60; i++ {
		id := fmt.Sprintf("g%02d", i)
		if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: "p", Body: []byte(`{"id":"` + id + `"}`), PartitionKey: StringKey(id), HasPartitionKey: true}); err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for _, r := range []string{"0", "1", "2", "3"} {
		res, err := e.QueryItems(ctx, &QueryRequest{Database: "db", Container: "p", Query: "SELECT VALUE COUNT(1) FROM c", PartitionKeyRangeID: r, SinglePartitionKeyRange: true})
		if err != nil || len(res.Items) != 1 {
			t.Fatalf("count of range %s: %v, %v", r, res, err)
		}
		var n int
		_ = json.Unmarshal(res.Items[0], &n)
		all, err := e.QueryItems(ctx, &QueryRequest{Database: "db", Container: "p", Query: "SELECT c.id FROM c", PartitionKeyRangeID: r, SinglePartitionKeyRange: true, MaxItems: 100})
		if err != nil || len(all.Items) != n {
			t.Errorf("range %s counts %d items and lists %d (%v)", r, n, len(all.Items), err)
		}
		total += n
	}
	if total != 60 {
		t.Errorf("the four ranges count %d items, want 60", total)
	}
}
