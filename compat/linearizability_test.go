package compat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// The linearizability check: clients run reads, ETag-conditional replaces,
// patch increments and two-item batches on two hot items of one partition,
// and porcupine checks each recorded history against a sequential model of
// Cosmos items.

const (
	linHistories = 200
	linClients   = 3
	linOpsEach   = 6
)

type linKind int

const (
	linRead linKind = iota
	linReplace
	linIncr
	linBatch
)

// linItem is the model of one item: its counter and its current ETag.
type linItem struct {
	n    int64
	etag string
}

// linState is the model's state: both hot items.
type linState [2]linItem

type linInput struct {
	kind    linKind
	item    int
	ifMatch string // replace: always; batch: on item 1, or "" for none
	delta   int64  // incr and batch
	newN    int64  // replace
}

type linOutput struct {
	ok   bool // false: 412 (replace) or a failed batch
	n    [2]int64
	etag [2]string
}

// linModel is the sequential specification: a read returns the current value
// and ETag; a write with a matching If-Match (or none) applies and gives the
// item a new ETag; one that does not match fails and changes nothing; a batch
// applies both increments or neither.
var linModel = porcupine.Model{
	Init: func() any { return linState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(linState), input.(linInput), output.(linOutput)
		i := in.item
		switch in.kind {
		case linRead:
			return out.ok && s[i].n == out.n[i] && s[i].etag == out.etag[i], s
		case linReplace:
			if s[i].etag != in.ifMatch {
				return !out.ok, s
			}
			if !out.ok || out.etag[i] == s[i].etag {
				return false, s
			}
			s[i] = linItem{in.newN, out.etag[i]}
			return true, s
		case linIncr:
			if !out.ok || out.n[i] != s[i].n+in.delta || out.etag[i] == s[i].etag {
				return false, s
			}
			s[i] = linItem{out.n[i], out.etag[i]}
			return true, s
		case linBatch:
			applies := in.ifMatch == "" || s[1].etag == in.ifMatch
			if !applies || !out.ok {
				return applies == out.ok, s
			}
			for j := range s {
				if out.n[j] != s[j].n+in.delta || out.etag[j] == s[j].etag {
					return false, s
				}
				s[j] = linItem{out.n[j], out.etag[j]}
			}
			return true, s
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		return fmt.Sprintf("%+v -> %+v", input, output)
	},
}

// linClient runs one client's random operations on the items ids and records
// them.
type linClient struct {
	c     *azcosmos.ContainerClient
	pk    azcosmos.PartitionKey
	ids   [2]string
	rng   *rand.Rand
	seen  [2]string // the ETag this client last saw of each item
	saw   [2]int64
	start time.Time
}

func (lc *linClient) now() int64 { return time.Since(lc.start).Nanoseconds() }

func (lc *linClient) op(ctx context.Context) (linInput, linOutput, error) {
	i := lc.rng.IntN(2)
	in := linInput{item: i}
	var out linOutput
	switch r := lc.rng.IntN(10); {
	case r < 3 || (r < 5 && lc.seen[i] == ""):
		in.kind = linRead
		resp, err := lc.c.ReadItem(ctx, lc.pk, lc.ids[i], nil)
		if err != nil {
			return in, out, err
		}
		var d struct{ N int64 }
		json.Unmarshal(resp.Value, &d)
		out = linOutput{ok: true}
		out.n[i], out.etag[i] = d.N, string(resp.ETag)
		lc.seen[i], lc.saw[i] = out.etag[i], d.N
	case r < 5:
		in.kind, in.ifMatch, in.newN = linReplace, lc.seen[i], lc.saw[i]+100
		etag := azcore.ETag(lc.seen[i])
		body, _ := json.Marshal(map[string]any{"id": lc.ids[i], "pk": "hot", "n": in.newN})
		resp, err := lc.c.ReplaceItem(ctx, lc.pk, lc.ids[i], body, &azcosmos.ItemOptions{IfMatchEtag: &etag})
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusPreconditionFailed {
			return in, out, nil
		}
		if err != nil {
			return in, out, err
		}
		out.ok, out.etag[i] = true, string(resp.ETag)
	case r < 8:
		in.kind, in.delta = linIncr, int64(1+lc.rng.IntN(3))
		var ops azcosmos.PatchOperations
		ops.AppendIncrement("/n", in.delta)
		resp, err := lc.c.PatchItem(ctx, lc.pk, lc.ids[i], ops, withContent)
		if err != nil {
			return in, out, err
		}
		var d struct{ N int64 }
		json.Unmarshal(resp.Value, &d)
		out.ok, out.n[i], out.etag[i] = true, d.N, string(resp.ETag)
	default:
		in.kind, in.item, in.delta = linBatch, 0, int64(1+lc.rng.IntN(3))
		b := lc.c.NewTransactionalBatch(lc.pk)
		var ops azcosmos.PatchOperations
		ops.AppendIncrement("/n", in.delta)
		b.PatchItem(lc.ids[0], ops, nil)
		var opts *azcosmos.TransactionalBatchItemOptions
		if lc.seen[1] != "" && lc.rng.IntN(2) == 0 {
			in.ifMatch = lc.seen[1]
			etag := azcore.ETag(in.ifMatch)
			opts = &azcosmos.TransactionalBatchItemOptions{IfMatchETag: &etag}
		}
		b.PatchItem(lc.ids[1], ops, opts)
		resp, err := lc.c.ExecuteTransactionalBatch(ctx, b, &azcosmos.TransactionalBatchOptions{EnableContentResponseOnWrite: true})
		if err != nil {
			return in, out, err
		}
		if !resp.Success {
			return in, out, nil
		}
		out.ok = true
		for j, r := range resp.OperationResults {
			var d struct{ N int64 }
			json.Unmarshal(r.ResourceBody, &d)
			out.n[j], out.etag[j] = d.N, string(r.ETag)
		}
	}
	return in, out, nil
}

func TestLinearizability(t *testing.T) {
	s := orrerytest.Start(t)
	checkLinearizable(t, []*azcosmos.ContainerClient{newContainer(t, s, "db", "hot", "/pk")}, linHistories)
}

// checkLinearizable records histories of linClients clients on two fresh hot
// items each, client i going through containers[i%len(containers)] (one
// container seen through several gateways, say), and fails the test on the
// first history porcupine finds not linearizable.
func checkLinearizable(t *testing.T, containers []*azcosmos.ContainerClient, histories int) {
	ctx := context.Background()
	c := containers[0]
	pk := azcosmos.NewPartitionKeyString("hot")
	start := time.Now()
	ops := 0
	var kinds, refused [4]int
	for h := range histories {
		ids := [2]string{fmt.Sprintf("h%d-0", h), fmt.Sprintf("h%d-1", h)}
		var history []porcupine.Operation
		init := linState{}
		for j, id := range ids {
			r, err := c.CreateItem(ctx, pk, mustJSON(t, map[string]any{"id": id, "pk": "hot", "n": 0}), nil)
			if err != nil {
				t.Fatal(err)
			}
			init[j] = linItem{0, string(r.ETag)}
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for cl := range linClients {
			lc := &linClient{c: containers[cl%len(containers)], pk: pk, ids: ids, rng: rand.New(rand.NewPCG(uint64(h), uint64(cl))), start: start}
			wg.Go(func() {
				for range linOpsEach {
					call := lc.now()
					in, out, err := lc.op(ctx)
					ret := lc.now()
					if err != nil {
						t.Errorf("history %d client %d: %v", h, cl, err)
						return
					}
					mu.Lock()
					history = append(history, porcupine.Operation{ClientId: cl, Input: in, Call: call, Output: out, Return: ret})
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		model := linModel
		model.Init = func() any { return init }
		if res := porcupine.CheckOperationsTimeout(model, history, 10*time.Second); res != porcupine.Ok {
			t.Fatalf("history %d is %s:\n%v", h, res, history)
		}
		ops += len(history)
		for _, op := range history {
			in, out := op.Input.(linInput), op.Output.(linOutput)
			kinds[in.kind]++
			if !out.ok {
				refused[in.kind]++
			}
		}
	}
	t.Logf("%d histories, %d operations, no violation (%v)", histories, ops, time.Since(start).Round(time.Millisecond))
	t.Logf("reads %d, replaces %d (%d refused: stale ETag), incrs %d, batches %d (%d failed whole: stale ETag)",
		kinds[linRead], kinds[linReplace], refused[linReplace], kinds[linIncr], kinds[linBatch], refused[linBatch])
	if refused[linReplace] == 0 || refused[linBatch] == 0 || kinds[linBatch]-refused[linBatch] == 0 {
		t.Errorf("the histories never exercised a refused replace, a failed batch and a committed batch")
	}
}

// TestLinearizabilityModel checks that the model rejects the anomalies the
// check is for.
func TestLinearizabilityModel(t *testing.T) {
	init := linState{{0, "e0"}, {0, "f0"}}
	op := func(call, ret int64, in linInput, out linOutput) porcupine.Operation {
		return porcupine.Operation{Input: in, Call: call, Output: out, Return: ret}
	}
	incr := func(item int, n int64, etag string) linOutput {
		o := linOutput{ok: true}
		o.n[item], o.etag[item] = n, etag
		return o
	}
	tests := []struct {
		name    string
		history []porcupine.Operation
		ok      bool
	}{
		{"two increments in turn", []porcupine.Operation{
			op(0, 1, linInput{kind: linIncr, delta: 1}, incr(0, 1, "e1")),
			op(2, 3, linInput{kind: linIncr, delta: 1}, incr(0, 2, "e2"))}, true},
		{"a lost increment", []porcupine.Operation{
			op(0, 1, linInput{kind: linIncr, delta: 1}, incr(0, 1, "e1")),
			op(2, 3, linInput{kind: linIncr, delta: 1}, incr(0, 1, "e2"))}, false},
		{"a stale replace that applied", []porcupine.Operation{
			op(0, 1, linInput{kind: linIncr, delta: 1}, incr(0, 1, "e1")),
			op(2, 3, linInput{kind: linReplace, ifMatch: "e0", newN: 5}, linOutput{ok: true, etag: [2]string{"e2"}})}, false},
		{"a read of an old value", []porcupine.Operation{
			op(0, 1, linInput{kind: linIncr, delta: 1}, incr(0, 1, "e1")),
			op(2, 3, linInput{kind: linRead}, incr(0, 0, "e0"))}, false},
		{"a batch that applied in part", []porcupine.Operation{
			op(0, 1, linInput{kind: linBatch, delta: 1}, linOutput{ok: true, n: [2]int64{1, 1}, etag: [2]string{"e1", "f1"}}),
			op(2, 3, linInput{kind: linRead, item: 1}, incr(1, 0, "f0"))}, false},
		{"a failed batch", []porcupine.Operation{
			op(0, 1, linInput{kind: linBatch, delta: 1, ifMatch: "stale"}, linOutput{}),
			op(2, 3, linInput{kind: linRead, item: 1}, incr(1, 0, "f0"))}, true},
		{"concurrent increments in either order", []porcupine.Operation{
			op(0, 3, linInput{kind: linIncr, delta: 1}, incr(0, 2, "e2")),
			op(1, 2, linInput{kind: linIncr, delta: 1}, incr(0, 1, "e1"))}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			model := linModel
			model.Init = func() any { return init }
			if got := porcupine.CheckOperations(model, tc.history); got != tc.ok {
				t.Errorf("linearizable = %v, want %v", got, tc.ok)
			}
		})
	}
}
