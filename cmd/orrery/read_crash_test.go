package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/server"
)

// rawRequest sends a request signed with the master key, as the SDKs that
// have bulk and stored procedure APIs do; it returns the status and body.
func rawRequest(ctx context.Context, endpoint, method, path, rtype, link string, body []byte, headers map[string]string) (int, []byte, error) {
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, err := server.Sign(server.EmulatorKey, method, rtype, link, date)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("x-ms-date", date)
	req.Header.Set("x-ms-version", "2020-07-15")
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
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

// counterDoc is the item the writers increment.
type counterDoc struct {
	ID string `json:"id"`
	PK string `json:"pk"`
	N  int64  `json:"n"`
}

// readCounterVia reads the counter by one of the read paths a crash must not
// take back: "batch" (a transactional batch of one Read), "bulk" (a
// non-atomic batch of one Read) or "sproc" (a stored procedure that reads it).
// ok is false when the read failed (the server may be dying).
func readCounterVia(ctx context.Context, how, endpoint string, container *azcosmos.ContainerClient) (n int64, ok bool) {
	var doc json.RawMessage
	switch how {
	case "batch":
		b := container.NewTransactionalBatch(azcosmos.NewPartitionKeyString("p"))
		b.ReadItem("n", nil)
		res, err := container.ExecuteTransactionalBatch(ctx, b, nil)
		if err != nil || !res.Success || len(res.OperationResults) != 1 {
			return 0, false
		}
		doc = res.OperationResults[0].ResourceBody
	case "bulk":
		status, body, err := rawRequest(ctx, endpoint, "POST", "dbs/reads/colls/c/docs", "docs", "dbs/reads/colls/c",
			[]byte(`[{"operationType":"Read","id":"n","partitionKey":"[\"p\"]"}]`),
			map[string]string{"x-ms-cosmos-is-batch-request": "true", "x-ms-cosmos-batch-atomic": "false",
				"x-ms-cosmos-batch-continue-on-error": "true", "x-ms-documentdb-partitionkeyrangeid": "0"})
		if err != nil || status != http.StatusOK {
			return 0, false
		}
		var results []struct {
			StatusCode   int             `json:"statusCode"`
			ResourceBody json.RawMessage `json:"resourceBody"`
		}
		if json.Unmarshal(body, &results) != nil || len(results) != 1 || results[0].StatusCode != http.StatusOK {
			return 0, false
		}
		doc = results[0].ResourceBody
	case "sproc":
		link := "dbs/reads/colls/c/sprocs/readn"
		status, body, err := rawRequest(ctx, endpoint, "POST", link, "sprocs", link, []byte(`[]`),
			map[string]string{"x-ms-documentdb-partitionkey": `["p"]`})
		if err != nil || status != http.StatusOK {
			return 0, false
		}
		doc = body
	}
	var d counterDoc
	if json.Unmarshal(doc, &d) != nil || d.ID != "n" {
		return 0, false
	}
	return d.N, true
}

// TestReadsShowOnlyDurableValues kills orrery with SIGKILL while writers
// increment a counter (by patch and by replace) and readers read it through a
// transactional batch, a bulk request and a stored procedure; after each
// restart the counter must be at least every value a reader was shown: a read
// must never show a write that a crash can take back.
func TestReadsShowOnlyDurableValues(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server as a child process many times")
	}
	bin := buildBinary(t)
	data := t.TempDir()
	const cycles = 12
	ctx := context.Background()
	readPaths := []string{"batch", "bulk", "sproc"}
	shownBy := map[string]*atomic.Int64{}
	for _, p := range readPaths {
		shownBy[p] = new(atomic.Int64)
	}
	lost, everShown := 0, map[string]bool{}
	for cycle := 0; cycle <= cycles; cycle++ {
		c := startChild(t, bin, "--data", data)
		client := newClient(t, c.endpoint)
		if cycle == 0 {
			if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "reads"}, nil); err != nil {
				t.Fatal(err)
			}
			db, _ := client.NewDatabase("reads")
			if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
				t.Fatal(err)
			}
			status, body, err := rawRequest(ctx, c.endpoint, "POST", "dbs/reads/colls/c/sprocs", "sprocs", "dbs/reads/colls/c",
				[]byte(`{"id":"readn","body":"function readn() { var c = getContext().getCollection(); if (!c.readDocument(c.getAltLink() + '/docs/n', function (err, doc) { if (err) throw err; getContext().getResponse().setBody(doc); })) throw new Error('not accepted'); }"}`), nil)
			if err != nil || status != http.StatusCreated {
				t.Fatalf("creating the reading procedure: %d %s %v", status, body, err)
			}
		}
		container, _ := client.NewContainer("reads", "c")
		if cycle == 0 {
			body, _ := json.Marshal(counterDoc{ID: "n", PK: "p"})
			if _, err := container.CreateItem(ctx, azcosmos.NewPartitionKeyString("p"), body, nil); err != nil {
				t.Fatal(err)
			}
		} else {
			res, err := container.ReadItem(ctx, azcosmos.NewPartitionKeyString("p"), "n", nil)
			if err != nil {
				t.Fatalf("cycle %d: reading the counter after the restart: %v", cycle, err)
			}
			var d counterDoc
			if err := json.Unmarshal(res.Value, &d); err != nil {
				t.Fatal(err)
			}
			for _, p := range readPaths {
				shown := shownBy[p].Swap(0)
				if shown > d.N {
					lost++
					t.Errorf("cycle %d: a %s read had shown the counter at %d, but %d survived the crash", cycle, p, shown, d.N)
				}
				everShown[p] = everShown[p] || shown > 0
			}
			if cycle == cycles {
				c.kill()
				t.Logf("%d kill -9 cycles; the counter reached %d", cycles, d.N)
				break
			}
		}

		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		pk := azcosmos.NewPartitionKeyString("p")
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for wctx.Err() == nil {
					if w%4 == 3 {
						// read, increment, replace if unchanged
						res, err := container.ReadItem(wctx, pk, "n", nil)
						if err != nil {
							continue
						}
						var d counterDoc
						if json.Unmarshal(res.Value, &d) != nil {
							continue
						}
						d.N++
						body, _ := json.Marshal(d)
						etag := res.ETag
						container.ReplaceItem(wctx, pk, "n", body, &azcosmos.ItemOptions{IfMatchEtag: &etag})
						continue
					}
					ops := azcosmos.PatchOperations{}
					ops.AppendIncrement("/n", 1)
					container.PatchItem(wctx, pk, "n", ops, nil)
				}
			}()
		}
		for i := range 2 * len(readPaths) {
			how := readPaths[i%len(readPaths)]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for wctx.Err() == nil {
					if n, ok := readCounterVia(wctx, how, c.endpoint, container); ok {
						for {
							cur := shownBy[how].Load()
							if n <= cur || shownBy[how].CompareAndSwap(cur, n) {
								break
							}
						}
					}
				}
			}()
		}
		time.Sleep(time.Duration(150+rand.IntN(200)) * time.Millisecond) // a random moment to crash at
		c.kill()
		cancel()
		wg.Wait()
		if testing.Verbose() {
			t.Logf("cycle %d: shown %d (batch) %d (bulk) %d (sproc)", cycle, shownBy["batch"].Load(), shownBy["bulk"].Load(), shownBy["sproc"].Load())
		}
	}
	if lost > 0 {
		t.Errorf("%d times a value shown by a read was lost in a crash", lost)
	}
	for _, p := range readPaths {
		if !everShown[p] {
			t.Errorf("no %s read ever showed the counter above 0: the harness checked nothing", p)
		}
	}
}
