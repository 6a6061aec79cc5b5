package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/engine/script"
	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/server"
)

// executeSprocCtx runs a stored procedure in partition pk like executeSproc,
// but gives up when ctx ends, answering the error instead of failing t.
func executeSprocCtx(ctx context.Context, s *orrerytest.Server, db, coll, id, pk string, args ...any) (int, []byte, error) {
	link := "dbs/" + db + "/colls/" + coll + "/sprocs/" + id
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, err := server.Sign(s.Key, "POST", "sprocs", link, date)
	if err != nil {
		return 0, nil, err
	}
	if args == nil {
		args = []any{}
	}
	body, err := json.Marshal(args)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", s.Endpoint+link, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for k, v := range map[string]string{"Authorization": auth, "x-ms-date": date, "x-ms-version": "2020-07-15",
		"Content-Type": "application/json", "x-ms-documentdb-partitionkey": `["` + pk + `"]`} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// TestEndlessScriptsDoNotStarveOtherPartitions has one caller loop endless
// procedures in its partition, several requests at once, so that its
// procedures both run and wait for slots; meanwhile trivial procedures of
// other partitions must each complete while the endless ones still run, long
// before their time budget ends. (An endless one may be stopped early with
// 429 when it took a slot kept for short scripts; its caller loops on.) Then
// the endless callers give up, and their scripts must stop and free their
// slots.
func TestEndlessScriptsDoNotStarveOtherPartitions(t *testing.T) {
	// The endless ones never end on their own here: their callers give up.
	// The budget only has to outlast the test on a loaded machine.
	const budget = 5 * time.Minute
	s := orrerytest.StartWith(t, orrerytest.Options{Engine: engine.Options{ScriptLimits: script.Limits{Timeout: budget}}})
	newContainer(t, s, "db", "items", "/pk")
	createSproc(t, s, "db", "items", "spin", `function spin() { while (true) {} }`)
	createSproc(t, s, "db", "items", "hello", `function hello() { getContext().getResponse().setBody("hello"); }`)

	const hot = 4
	hotCtx, cancelHot := context.WithCancel(context.Background())
	defer cancelHot()
	var hotEnded atomic.Int64 // endless procedures that ran to their budget's end
	var wg sync.WaitGroup
	for range hot {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for hotCtx.Err() == nil {
				status, _, err := executeSprocCtx(hotCtx, s, "db", "items", "spin", "hot")
				if err == nil && status != http.StatusTooManyRequests {
					hotEnded.Add(1)
					t.Errorf("an endless procedure answered %d before its caller gave up", status)
				}
			}
		}()
	}
	// Await the attack in place: an endless procedure running, another of
	// its caller queued.
	for deadline := time.Now().Add(budget / 2); ; time.Sleep(5 * time.Millisecond) {
		st := s.Engine.ScriptStats()
		if st.Running >= 1 && st.Waiting >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the endless procedures never took the slots: %+v", st)
		}
	}

	var latencies []time.Duration
	for i := range 20 {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		status, _, err := executeSprocCtx(ctx, s, "db", "items", "hello", "cold"+strconv.Itoa(i%3))
		cancel()
		latencies = append(latencies, time.Since(start))
		if err != nil || status != http.StatusOK {
			t.Fatalf("a trivial procedure of another partition answered %d, %v while one partition looped endless ones", status, err)
		}
		if n := hotEnded.Load(); n != 0 {
			t.Fatalf("a trivial procedure of another partition completed only after %d endless ones ended", n)
		}
	}
	slices.Sort(latencies)
	t.Logf("20 trivial procedures of other partitions while %d endless ones ran or waited: median %v, worst %v",
		hot, latencies[len(latencies)/2].Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond))
	if worst := latencies[len(latencies)-1]; worst > budget/4 {
		t.Errorf("a trivial procedure of another partition took %v", worst)
	}

	cancelHot()
	wg.Wait()
	for deadline := time.Now().Add(budget / 2); ; time.Sleep(5 * time.Millisecond) {
		st := s.Engine.ScriptStats()
		if st.Running == 0 && st.Waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the endless procedures kept their slots after their callers gave up: %+v", st)
		}
	}
}
