package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord"
	"github.com/orrery-db/orrery/coord/changefeed"
	"github.com/orrery-db/orrery/coord/outbox"
)

// BenchmarkRelay is the relay's throughput for 400 messages over 40
// partition keys to a publisher that takes 2 ms a message (a broker across
// a network), from written to published and marked: each iteration writes
// the messages (not timed), then runs a fresh relay until every record is
// marked.
func BenchmarkRelay(b *testing.B) {
	s := newShop(b)
	ctx := context.Background()
	const messages, keys = 400, 40
	run := 0
	var relaying time.Duration
	for b.Loop() {
		run++
		b.StopTimer()
		for i := range messages {
			cust := fmt.Sprintf("k%02d", i%keys)
			bt := s.orders.NewTransactionalBatch(azcosmos.NewPartitionKeyString(cust))
			payload, _ := json.Marshal(map[string]int{"seq": i})
			if err := s.box.Add(&bt, cust, outbox.Message{ID: fmt.Sprintf("r%d-%d", run, i), Payload: payload}); err != nil {
				b.Fatal(err)
			}
			if err := coord.Committed(s.orders.ExecuteTransactionalBatch(ctx, bt, nil)); err != nil {
				b.Fatal(err)
			}
		}
		pub := publisherFunc(func(ctx context.Context, m outbox.Message) error {
			time.Sleep(2 * time.Millisecond)
			return nil
		})
		r, err := outbox.NewRelay(s.client, s.orders, s.leases, pub, &outbox.RelayOptions{
			Name:      fmt.Sprintf("bench-%d", run),
			Processor: &changefeed.Options{PollInterval: 20 * time.Millisecond, AcquireInterval: 50 * time.Millisecond, MaxItems: 100}})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		started := time.Now()
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _ = r.Run(rctx); close(done) }()
		for {
			st, err := r.Stats(ctx)
			if err == nil && st.Unsent == 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		relaying += time.Since(started)
		stop()
		<-done
	}
	b.ReportMetric(float64(messages*b.N)/relaying.Seconds(), "messages/s")
}
