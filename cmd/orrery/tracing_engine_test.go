package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/orrery-db/orrery/server"
)

// TestStoredProcedureRunIsASpanUnderTheRequest: a stored procedure's run in
// the engine is a span under the server's span of the request, in the trace
// the client sent, with the script's outcome.
func TestStoredProcedureRunIsASpanUnderTheRequest(t *testing.T) {
	col := &collector{got: make(chan struct{}, 1)}
	hs := httptest.NewServer(col)
	defer hs.Close()
	bin := buildBinary(t)
	srv := startChildEnv(t, bin, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + hs.URL, "OTEL_BSP_SCHEDULE_DELAY=100"}, "--memory")
	defer srv.kill()

	const traceID, parentID = "5bf92f3577b34da6a3ce929d0e0e4737", "01f067aa0ba902b8"
	traceparent := "00-" + traceID + "-" + parentID + "-01"
	ctx := context.Background()
	client := newClient(t, srv.endpoint)
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := client.NewDatabase("db")
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
		t.Fatal(err)
	}
	// The Go SDK has no stored procedures: signed REST calls, as the
	// JavaScript SDK makes them.
	call := func(path, resourceType, link, body string, status int) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.endpoint+path, bytes.NewReader([]byte(body)))
		date := time.Now().UTC().Format(http.TimeFormat)
		auth, err := server.Sign(server.EmulatorKey, "POST", resourceType, link, date)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("x-ms-date", date)
		req.Header.Set("Authorization", auth)
		req.Header.Set("x-ms-version", "2020-11-05")
		req.Header.Set("x-ms-documentdb-partitionkey", `["a"]`)
		req.Header.Set("traceparent", traceparent)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != status {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
	}
	call("dbs/db/colls/c/sprocs", "sprocs", "dbs/db/colls/c", `{"id":"s","body":"function () { getContext().getResponse().setBody(1); }"}`, 201)
	call("dbs/db/colls/c/sprocs/s", "sprocs", "dbs/db/colls/c/sprocs/s", `[]`, 200)

	deadline := time.After(20 * time.Second)
	for {
		col.mu.Lock()
		var request, run *tracepb.Span
		for _, s := range col.spans {
			switch s.Name {
			case "sprocs.execute":
				request = s
			case "sprocs.run":
				run = s
			}
		}
		col.mu.Unlock()
		if request != nil && run != nil {
			if hex.EncodeToString(request.TraceId) != traceID || hex.EncodeToString(request.ParentSpanId) != parentID {
				t.Fatalf("the request's span is in trace %x under %x; want %s under %s", request.TraceId, request.ParentSpanId, traceID, parentID)
			}
			if !bytes.Equal(run.TraceId, request.TraceId) || !bytes.Equal(run.ParentSpanId, request.SpanId) {
				t.Fatalf("the run's span is in trace %x under %x; want the request's span %x", run.TraceId, run.ParentSpanId, request.SpanId)
			}
			outcome := ""
			for _, a := range run.Attributes {
				if a.Key == "orrery.script.outcome" {
					outcome = a.Value.GetStringValue()
				}
			}
			if outcome != "ok" {
				t.Errorf("the run's span says outcome %q, want ok", outcome)
			}
			return
		}
		select {
		case <-col.got:
		case <-deadline:
			t.Fatalf("the request's and the run's spans did not both reach the collector within 20 s (request %v, run %v)", request != nil, run != nil)
		}
	}
}
