package server

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/faults"
	"github.com/orrery-db/orrery/storage/memory"
)

// faultServer serves a container c (partition key /pk) observed as orrery
// serve observes it, with its access log in logs.
func faultServer(t *testing.T) (*httptest.Server, *Server, *engine.Engine, *syncBuffer) {
	t.Helper()
	ctx := t.Context()
	store := memory.New()
	eng, err := engine.Open(ctx, store, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Engine: eng, Keys: Keys{Master: EmulatorKey, ReadOnly: readOnlyKey}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	reg := prometheus.NewRegistry()
	if err := reg.Register(NewFaultCollector(srv)); err != nil {
		t.Fatal(err)
	}
	h, err := Observe(srv, ObserveOptions{Registerer: reg, Gatherer: reg, MetricsKey: EmulatorKey, AccessLog: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(func() { hs.Close(); eng.Close(); store.Close() })
	eng.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	eng.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}`), nil)
	return hs, srv, eng, logs
}

// call sends a request signed with key as rtype/link.
func call(t *testing.T, hs *httptest.Server, key, method, rtype, link, path, pk string, body string) *http.Response {
	t.Helper()
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, _ := Sign(key, method, rtype, link, date)
	req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
	req.Header.Set("x-ms-date", date)
	req.Header.Set("Authorization", auth)
	if pk != "" {
		req.Header.Set("x-ms-documentdb-partitionkey", pk)
	}
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readAll(t *testing.T, r *http.Response) string {
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

func TestFaultRulesAreManagedThroughTheAdminAPIWithTheMasterKeyOnly(t *testing.T) {
	hs, _, _, _ := faultServer(t)
	rule := `{"id":"slow","condition":{"operations":["ReadItem"],"container":"c"},"result":{"type":"TooManyRequests","retryAfter":"250ms"},"times":2}`
	if r := call(t, hs, readOnlyKey, "POST", "faults", "", "/_admin/faults", "", rule); r.StatusCode != 403 {
		t.Fatalf("the read-only key added a rule: %d", r.StatusCode)
	}
	r := call(t, hs, EmulatorKey, "POST", "faults", "", "/_admin/faults", "", rule)
	if r.StatusCode != 201 {
		t.Fatalf("add: %d %s", r.StatusCode, readAll(t, r))
	}
	if r := call(t, hs, EmulatorKey, "POST", "faults", "", "/_admin/faults", "", rule); r.StatusCode != 400 || !strings.Contains(readAll(t, r), "installed already") {
		t.Fatalf("a second rule of one id: %d", r.StatusCode)
	}
	if r := call(t, hs, EmulatorKey, "POST", "faults", "", "/_admin/faults", "", `{"id":"x","result":{"type":"Nope"}}`); r.StatusCode != 400 {
		t.Fatalf("a bad rule: %d", r.StatusCode)
	}
	// The read is answered as the service answers a throttled one.
	r = call(t, hs, EmulatorKey, "GET", "docs", "dbs/db/colls/c/docs/x", "/dbs/db/colls/c/docs/x", `["p"]`, "")
	body := readAll(t, r)
	if r.StatusCode != 429 || r.Header.Get("x-ms-substatus") != "3200" || r.Header.Get("x-ms-retry-after-ms") != "250" ||
		r.Header.Get("x-ms-activity-id") == "" || r.Header.Get("x-ms-request-charge") != "0" ||
		!strings.Contains(body, `"code":"TooManyRequests"`) || !strings.Contains(body, "Request rate is large") {
		t.Fatalf("throttled read: %d %v %s", r.StatusCode, r.Header, body)
	}
	r = call(t, hs, EmulatorKey, "GET", "faults", "faults/slow", "/_admin/faults/slow", "", "")
	var st struct{ Hits int64 }
	json.Unmarshal([]byte(readAll(t, r)), &st)
	if st.Hits != 1 {
		t.Fatalf("hits: %d, want 1", st.Hits)
	}
	if r := call(t, hs, EmulatorKey, "DELETE", "faults", "faults/slow", "/_admin/faults/slow", "", ""); r.StatusCode != 204 {
		t.Fatalf("remove: %d", r.StatusCode)
	}
	if r := call(t, hs, EmulatorKey, "GET", "docs", "dbs/db/colls/c/docs/x", "/dbs/db/colls/c/docs/x", `["p"]`, ""); r.StatusCode != 404 {
		t.Fatalf("after the rule was removed: %d, want the item's 404", r.StatusCode)
	}
	if r := call(t, hs, EmulatorKey, "DELETE", "faults", "", "/_admin/faults", "", ""); r.StatusCode != 200 || readAll(t, r) != `{"removed":0}` {
		t.Fatalf("clear: %d", r.StatusCode)
	}
}

func TestAnAppliedThenLostWriteCommitsAndTheAccessLogAndMetricsNameTheRule(t *testing.T) {
	hs, srv, eng, logs := faultServer(t)
	if _, err := srv.Faults().Add(ruleOf(t, `{"id":"lost","condition":{"operations":["CreateItem"]},"result":{"type":"AppliedThenLost"},"times":1}`)...); err != nil {
		t.Fatal(err)
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, _ := Sign(EmulatorKey, "POST", "docs", "dbs/db/colls/c", date)
	req, _ := http.NewRequest("POST", hs.URL+"/dbs/db/colls/c/docs", strings.NewReader(`{"id":"a","pk":"p"}`))
	req.Header.Set("x-ms-date", date)
	req.Header.Set("Authorization", auth)
	req.Header.Set("x-ms-documentdb-partitionkey", `["p"]`)
	_, err := hs.Client().Do(req)
	if err == nil || !(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset") || strings.Contains(err.Error(), "EOF")) {
		t.Fatalf("the reply was not lost: %v", err)
	}
	if _, err := eng.ReadItem(t.Context(), &engine.ItemRequest{Database: "db", Container: "c", ID: "a", PartitionKey: engine.StringKey("p"), HasPartitionKey: true}); err != nil {
		t.Fatalf("the write whose reply was lost was not applied: %v", err)
	}
	// The client sees the reset before the handler returns and the
	// access log line is written: wait for it.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "fault=lost:AppliedThenLost") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "fault=lost:AppliedThenLost") || !strings.Contains(logs.String(), "status=0") {
		t.Fatalf("the access log does not mark the dropped reply:\n%s", logs)
	}
	req, _ = http.NewRequest("GET", hs.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+EmulatorKey)
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if m := readAll(t, resp); !strings.Contains(m, `orrery_fault_injections_total{rule="lost",type="AppliedThenLost"} 1`) {
		t.Fatalf("metrics do not count the hit:\n%s", m)
	}
}

func TestAPartitionIsGoneFaultSplitsTheRangeForReal(t *testing.T) {
	hs, srv, eng, _ := faultServer(t)
	if _, err := srv.Faults().Add(ruleOf(t, `{"id":"split","condition":{"operations":["ChangeFeedItem"]},"result":{"type":"PartitionIsGone"},"times":1}`)...); err != nil {
		t.Fatal(err)
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, _ := Sign(EmulatorKey, "GET", "docs", "dbs/db/colls/c", date)
	req, _ := http.NewRequest("GET", hs.URL+"/dbs/db/colls/c/docs", nil)
	req.Header.Set("x-ms-date", date)
	req.Header.Set("Authorization", auth)
	req.Header.Set("A-IM", "Incremental Feed")
	req.Header.Set("x-ms-documentdb-partitionkeyrangeid", "0")
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	resp.Body.Close()
	if resp.StatusCode != 410 || resp.Header.Get("x-ms-substatus") != "1002" {
		t.Fatalf("a change-feed page of the range split: %d %s", resp.StatusCode, body)
	}
	c, _ := eng.Container(t.Context(), "db", "c")
	ranges, _ := c.PartitionKeyRanges()
	if len(ranges) != 2 || len(ranges[0].Parents) != 1 || ranges[0].Parents[0] != "0" {
		t.Fatalf("the container's ranges after the fault: %+v", ranges)
	}
}

func ruleOf(t *testing.T, s string) []faults.Rule {
	t.Helper()
	rules, err := faults.ParseRules([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return rules
}
