package compat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// BenchmarkEnforcedThroughput drives a container provisioned at 400 RU/s
// with 16 Go SDK writers for 20 s, on a server started with
// EnforceThroughput, after checking for 3 s on a server without it that the
// same load spends well over 2,000 RU/s. It reports the RU/s achieved (the
// charges of the writes that succeeded, per second), which must be within
// 10% of 400, the 429s the server answered and those the SDK surfaced after
// its retries. Run it with -benchtime=1x.
func BenchmarkEnforcedThroughput(b *testing.B) {
	const writers, provisioned = 16, 400
	run := func(enforce bool, d time.Duration) (ru float64, written, surfaced, throttled int64) {
		s := orrerytest.StartWith(b, orrerytest.Options{EnforceThroughput: enforce, Metrics: true})
		ctx := context.Background()
		if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "tp"}, nil); err != nil {
			b.Fatal(err)
		}
		db, _ := s.Client.NewDatabase("tp")
		tput := azcosmos.NewManualThroughputProperties(provisioned)
		if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c", PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}},
			&azcosmos.CreateContainerOptions{ThroughputProperties: &tput}); err != nil {
			b.Fatal(err)
		}
		c, _ := db.NewContainer("c")
		var charge atomic.Uint64 // hundredths of RU
		var n, ok, refused atomic.Int64
		deadline := time.Now().Add(d)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// benchItem writes partition "p": one physical partition
				// either way, at 400 RU/s.
				_ = w
				pk := azcosmos.NewPartitionKeyString("p")
				for time.Now().Before(deadline) {
					i := n.Add(1)
					resp, err := c.UpsertItem(ctx, pk, benchItem(fmt.Sprint(i)), nil)
					var re *azcore.ResponseError
					switch {
					case err == nil:
						ok.Add(1)
						charge.Add(uint64(resp.RequestCharge * 100))
					case errors.As(err, &re) && re.StatusCode == 429:
						refused.Add(1)
					default:
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		return float64(charge.Load()) / 100 / d.Seconds(), ok.Load(), refused.Load(), throttledCount(b, s)
	}
	free, _, _, _ := run(false, 3*time.Second)
	b.Logf("the same load without enforcement: %.0f RU/s", free)
	if free < 2000 {
		b.Fatalf("the load spends %.0f RU/s without enforcement: not the 2,000 RU/s the benchmark needs", free)
	}
	b.ResetTimer()
	got, okN, surfaced, throttled := run(true, 20*time.Second)
	b.ReportMetric(got, "RU/s")
	b.ReportMetric(got/provisioned, "of-provisioned")
	b.ReportMetric(float64(throttled), "429s-answered")
	b.ReportMetric(float64(surfaced), "429s-surfaced")
	b.ReportMetric(float64(okN), "writes")
	b.Logf("enforced at %d RU/s: %.0f RU/s achieved (%.3f), %d writes, %d 429s answered, %d surfaced by the SDK after its retries",
		provisioned, got, got/provisioned, okN, throttled, surfaced)
	if got < 0.9*provisioned || got > 1.1*provisioned {
		b.Errorf("achieved %.0f RU/s at %d RU/s provisioned: not within 10%%", got, provisioned)
	}
}

// throttledCount reads orrery_throughput_throttled_total from the server's
// metrics (0 when it enforces no throughput).
func throttledCount(b *testing.B, s *orrerytest.Server) int64 {
	req, _ := http.NewRequest("GET", s.Endpoint+"metrics", nil)
	req.Header.Set("Authorization", "Bearer "+s.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "orrery_throughput_throttled_total "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return int64(f)
		}
	}
	return 0
}
