package main

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/orrery-db/orrery/server"
)

// collector is an OTLP/HTTP trace receiver that keeps the spans it gets.
type collector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	got   chan struct{}
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	c.mu.Unlock()
	select {
	case c.got <- struct{}{}:
	default:
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Write(b)
}

// traceparentPolicy sends a fixed W3C trace context on every request, as a
// traced client does.
type traceparentPolicy struct{ value string }

func (p traceparentPolicy) Do(req *policy.Request) (*http.Response, error) {
	req.Raw().Header.Set("traceparent", p.value)
	return req.Next()
}

// TestRequestsContinueTheCallersTrace: with OTEL_EXPORTER_OTLP_ENDPOINT set,
// a request's span is exported under the trace and parent the client sent.
func TestRequestsContinueTheCallersTrace(t *testing.T) {
	col := &collector{got: make(chan struct{}, 1)}
	hs := httptest.NewServer(col)
	defer hs.Close()
	bin := buildBinary(t)
	srv := startChildEnv(t, bin, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + hs.URL, "OTEL_BSP_SCHEDULE_DELAY=100"}, "--memory")
	defer srv.kill()

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	cred, _ := azcosmos.NewKeyCredential(server.EmulatorKey)
	client, err := azcosmos.NewClientWithKey(srv.endpoint, cred, &azcosmos.ClientOptions{ClientOptions: policy.ClientOptions{
		PerCallPolicies: []policy.Policy{traceparentPolicy{"00-" + traceID + "-" + parentID + "-01"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateDatabase(context.Background(), azcosmos.DatabaseProperties{ID: "traced"}, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	for {
		col.mu.Lock()
		for _, s := range col.spans {
			if s.Name == "dbs.create" {
				if hex.EncodeToString(s.TraceId) != traceID || hex.EncodeToString(s.ParentSpanId) != parentID {
					col.mu.Unlock()
					t.Fatalf("span %s in trace %x under %x; want trace %s under %s", s.Name, s.TraceId, s.ParentSpanId, traceID, parentID)
				}
				col.mu.Unlock()
				return
			}
		}
		col.mu.Unlock()
		select {
		case <-col.got:
		case <-deadline:
			t.Fatal("no span for the database creation reached the collector within 20 s")
		}
	}
}
