package lock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord/internal/cosmostest"
	"github.com/orrery-db/orrery/coord/lock"
)

// server is the one server of this test binary (examples need it before
// any test runs); nil when there is none.
var server *cosmostest.Server

// endpoint and key are what the examples connect to.
var endpoint, key string

func TestMain(m *testing.M) {
	if w := os.Getenv(workerEnv); w != "" {
		os.Exit(runWorker(w))
	}
	s, stop, err := cosmostest.StartForMain()
	if err != nil {
		fmt.Fprintf(os.Stderr, "coord/lock: skipping, no server: %v\n", err)
		os.Exit(0)
	}
	server, endpoint, key = s, s.Endpoint, s.Key
	code := m.Run()
	stop()
	os.Exit(code)
}

var dbSeq atomic.Int64

// newDB makes a database of its own for a test and returns its name.
func newDB(t testing.TB, c *azcosmos.Client) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), dbSeq.Add(1))
	if _, err := c.CreateDatabase(context.Background(), azcosmos.DatabaseProperties{ID: name}, nil); err != nil {
		t.Fatalf("creating database: %v", err)
	}
	return name
}

// client returns a client for the test server, with extra per-try policies.
func client(t testing.TB, o *azcosmos.ClientOptions) *azcosmos.Client {
	t.Helper()
	c, err := server.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// lockContainer creates (or opens) the lock container of database db.
func lockContainer(t testing.TB, c *azcosmos.Client, db string) *azcosmos.ContainerClient {
	t.Helper()
	d, err := c.NewDatabase(db)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := lock.CreateContainer(context.Background(), d, "locks")
	if err != nil {
		t.Fatal(err)
	}
	return lc
}

// dataContainer creates (or opens) container "data" (partition key /pk).
func dataContainer(t testing.TB, c *azcosmos.Client, db string) *azcosmos.ContainerClient {
	t.Helper()
	d, err := c.NewDatabase(db)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.CreateContainer(context.Background(), azcosmos.ContainerProperties{
		ID: "data", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}},
	}, nil)
	var re *azcore.ResponseError
	if err != nil && !(errors.As(err, &re) && re.StatusCode == http.StatusConflict) {
		t.Fatal(err)
	}
	dc, err := d.NewContainer("data")
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// faults is a per-try pipeline policy that injects failures into one
// client's traffic: it can drop the reply of a request the server has
// already applied, or hold every request until released (a holder paused,
// or cut off from the database).
type faults struct {
	mu      sync.Mutex
	drop    func(*http.Request) bool // drop the reply of matching requests
	dropped int
	stalled chan struct{}            // non-nil: requests wait for it to close
	hide    func(*http.Request) bool // answer matching reads 404, as a stale replica would
}

var errInjected = errors.New("injected: connection reset after the request was sent")

func (f *faults) Do(req *policy.Request) (*http.Response, error) {
	f.mu.Lock()
	stall := f.stalled
	f.mu.Unlock()
	if stall != nil {
		select {
		case <-stall:
		case <-req.Raw().Context().Done():
			return nil, req.Raw().Context().Err()
		}
	}
	if f.hide != nil && req.Raw().Method == http.MethodGet && f.hide(req.Raw()) {
		// A lagging replica: the item is not there yet.
		return &http.Response{
			StatusCode: http.StatusNotFound,
			Header:     http.Header{"Content-Type": {"application/json"}},
			Body:       io.NopCloser(strings.NewReader(`{"code":"NotFound","message":"Entity with the specified id does not exist in the system."}`)),
			Request:    req.Raw(),
		}, nil
	}
	resp, err := req.Next()
	if err != nil {
		return resp, err
	}
	f.mu.Lock()
	drop := f.drop != nil && f.drop(req.Raw())
	if drop {
		f.dropped++
	}
	f.mu.Unlock()
	if drop {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, errInjected
	}
	return resp, nil
}

// dropNext makes the next n requests matching match lose their replies.
func (f *faults) dropNext(n int, match func(*http.Request) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	left := n
	f.drop = func(r *http.Request) bool {
		if left > 0 && match(r) {
			left--
			return true
		}
		return false
	}
}

func (f *faults) droppedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped
}

// stall holds every request from now on until the returned function is
// called.
func (f *faults) stall() (resume func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	f.stalled = ch
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		f.stalled = nil
		f.mu.Unlock()
		close(ch)
	}
}

func isBatch(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.EqualFold(r.Header.Get("x-ms-cosmos-is-batch-request"), "true")
}

func isReplace(r *http.Request) bool { return r.Method == http.MethodPut }
func isDelete(r *http.Request) bool  { return r.Method == http.MethodDelete }
