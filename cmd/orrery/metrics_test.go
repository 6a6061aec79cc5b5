package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// TestServeExposesEngineAndStorageMetrics: the binary registers the
// engine's figures (change feed, TTL, scripts) and the store's beside the
// request metrics, on the --metrics-addr listener without authentication.
func TestServeExposesEngineAndStorageMetrics(t *testing.T) {
	bin := buildBinary(t)
	srv := startChild(t, bin, "--data", t.TempDir(), "--metrics-addr", "127.0.0.1:0", "--access-log=false")
	defer srv.kill()
	if srv.metrics == "" {
		t.Fatal("the server did not log its metrics address")
	}
	ctx := context.Background()
	client := newClient(t, srv.endpoint)
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := client.NewDatabase("db")
	ttl := int32(3600)
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "orders", DefaultTimeToLive: &ttl,
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
		t.Fatal(err)
	}
	orders, _ := db.NewContainer("orders")
	for _, id := range []string{"1", "2", "3"} {
		if _, err := orders.CreateItem(ctx, azcosmos.NewPartitionKeyString("a"), []byte(`{"id":"`+id+`","pk":"a"}`), nil); err != nil {
			t.Fatal(err)
		}
	}

	resp, err := http.Get("http://" + srv.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics on --metrics-addr: %d %s", resp.StatusCode, body)
	}
	value := func(series string) (float64, bool) {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		return v, err == nil
	}
	for _, series := range []string{
		`orrery_changefeed_newest_lsn{container="orders",database="db"}`,
		`orrery_changefeed_watermark_lsn`,
		`orrery_ttl_swept_items_total`,
		`orrery_scripts_running`,
		`orrery_storage_disk_bytes`,
		`orrery_requests_total{operation="docs.create",status="201"}`,
	} {
		if _, ok := value(series); !ok {
			t.Errorf("%s missing from /metrics", series)
		}
	}
	if v, _ := value(`orrery_ttl_backlog_items{container="orders",database="db"}`); v != 0 {
		t.Errorf("TTL backlog %v with nothing expired", v)
	}
	if v, _ := value(`orrery_requests_total{operation="docs.create",status="201"}`); v != 3 {
		t.Errorf("%v item creates counted, want 3", v)
	}
	newest, _ := value(`orrery_changefeed_newest_lsn{container="orders",database="db"}`)
	watermark, _ := value(`orrery_changefeed_watermark_lsn`)
	if newest == 0 || newest > watermark {
		t.Errorf("the container's newest LSN %v, the watermark %v: want a write at or below it", newest, watermark)
	}
}
