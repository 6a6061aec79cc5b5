package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
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
	if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), &Throughput{Manual: 12000}); err != nil {
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
	if _, err := e.ReplaceContainer(ctx, "db", "c", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]},"defaultTtl":60}`), ""); err != nil {
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
	if _, err := e.SplitPartitionKeyRange(ctx, "db", "v1", "0"); err == nil {
		t.Error("a V1 container's range split")
	} else if e, ok := AsError(err); !ok || e.Status != 400 {
		t.Errorf("splitting a V1 container: %v, want 400", err)
	}
}
