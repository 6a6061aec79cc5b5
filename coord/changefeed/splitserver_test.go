package changefeed

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// signed sends a request to the fixture's server, signed with its master key
// for the given resource type and link, and returns status and body.
func (f *fixture) signed(method, path, rtype, rlink string, body []byte) (int, []byte) {
	f.t.Helper()
	date := time.Now().UTC().Format(http.TimeFormat)
	key, _ := base64.StdEncoding.DecodeString(f.server.Key)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(strings.ToLower(method) + "\n" + rtype + "\n" + rlink + "\n" + strings.ToLower(date) + "\n\n"))
	auth := url.QueryEscape("type=master&ver=1.0&sig=" + base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	req, _ := http.NewRequest(method, strings.TrimSuffix(f.server.Endpoint, "/")+path, bytes.NewReader(body))
	req.Header.Set("x-ms-date", date)
	req.Header.Set("x-ms-version", "2020-07-15")
	req.Header.Set("authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// pkRange is a partition key range as the server lists it.
type pkRange struct {
	ID           string `json:"id"`
	MinInclusive string `json:"minInclusive"`
	MaxExclusive string `json:"maxExclusive"`
}

// pkRanges lists the monitored container's partition key ranges.
func (f *fixture) pkRanges() []pkRange {
	f.t.Helper()
	c := f.monitored.ID()
	status, body := f.signed("GET", "/dbs/db/colls/"+c+"/pkranges", "pkranges", "dbs/db/colls/"+c, nil)
	if status != http.StatusOK {
		f.t.Fatalf("listing partition key ranges: %d %s", status, body)
	}
	var feed struct {
		PartitionKeyRanges []pkRange
	}
	if err := json.Unmarshal(body, &feed); err != nil {
		f.t.Fatal(err)
	}
	return feed.PartitionKeyRanges
}

// rangeIDs lists the monitored container's partition key ranges by id.
func (f *fixture) rangeIDs() []string {
	f.t.Helper()
	var ids []string
	for _, r := range f.pkRanges() {
		ids = append(ids, r.ID)
	}
	return ids
}

// split asks the server to split a range of the monitored container with
// its administrative call, POST /_admin/dbs/{db}/colls/{coll}/pkranges/{id}/split
// signed as a POST on the range. It reports false, splitting nothing, when
// the server has no such call: probing a range that does not exist answers
// 410/1002 on a server that has it.
func (f *fixture) split(id string) (int, []byte) {
	c := f.monitored.ID()
	return f.signed("POST", "/_admin/dbs/db/colls/"+c+"/pkranges/"+id+"/split", "pkranges", "dbs/db/colls/"+c+"/pkranges/"+id, nil)
}

func (f *fixture) canSplit() bool {
	status, _ := f.split("no-such-range")
	return status == http.StatusGone
}

// TestProcessorSplitUnderLoad splits a range of the monitored container
// while two instances process it and writers keep writing to every key:
// the parent's lease becomes its children's, nothing is skipped or
// reordered per partition key, every change is delivered, and afterwards
// the estimator reports nothing left. It runs when the server has the
// administrative split call (see split).
func TestProcessorSplitUnderLoad(t *testing.T) {
	f := newFixture(t, 40000)
	if !f.canSplit() {
		t.Skip("the server has no administrative split call (POST /_admin/dbs/{db}/colls/{coll}/pkranges/{id}/split)")
	}
	const pks = 32
	rec := newRecorder()
	f.startWorker("w0", rec.handler, nil)
	f.startWorker("w1", rec.handler, nil)

	// Writers: each key's changes in order, until told to stop.
	var stop atomic.Bool
	var wg sync.WaitGroup
	counts := make([]int, pks)
	for k := range pks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pk := fmt.Sprintf("pk%02d", k)
			for s := 0; !stop.Load() || s < 20; s++ {
				b, _ := json.Marshal(change{ID: fmt.Sprintf("%s-%04d", pk, s), PK: pk, Seq: s})
				if _, err := f.monitored.CreateItem(context.Background(), pkOf(pk), b, nil); err != nil {
					t.Error(err)
					return
				}
				counts[k] = s + 1
			}
		}()
	}
	rec.await(t, 200, 60*time.Second)
	before := f.rangeIDs()
	status, body := f.split(before[0])
	if status != http.StatusOK {
		t.Fatalf("splitting range %s: %d %s", before[0], status, body)
	}
	mark := 0
	rec.mu.Lock()
	mark = rec.delivered
	rec.mu.Unlock()
	rec.await(t, mark+200, 60*time.Second)
	stop.Store(true)
	wg.Wait()
	total := 0
	for _, n := range counts {
		total += n
	}
	rec.await(t, total, 60*time.Second)

	ranges, err := f.monitored.ReadFeedRanges(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, r := range ranges {
		want = append(want, leaseToken(r))
	}
	slices.Sort(want)
	if len(want) != len(before)+1 {
		t.Fatalf("%d ranges after splitting one of %d", len(want), len(before))
	}
	st := &store{c: f.leases, prefix: f.prefix("proc")}
	deadline := time.Now().Add(30 * time.Second)
	for {
		all, err := st.list(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range all {
			got = append(got, l.LeaseToken)
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leases %v after the split, want one per range %v", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	est, err := NewEstimator(f.client, f.monitored, f.leases, "proc", nil)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n, err := est.Total(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("estimator reports %d after every change was delivered", n)
		}
	}
}

func (f *fixture) rid() string {
	props, err := f.monitored.Read(context.Background(), nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return props.ContainerProperties.ResourceID
}
