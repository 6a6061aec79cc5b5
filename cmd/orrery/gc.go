package main

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// gcHeadroom is how far the Go heap may grow past its live data before a
// collection, at least: the server's own heap is small (Pebble keeps its
// memtables and block cache outside it), and with Go's default (GOGC=100:
// as far as the live data again) a few MB of live heap under a request per
// few ten microseconds made several collections a second, 10–20% of a
// request's CPU. Past gcHeadroom of live heap, GOGC=100 holds as before.
const gcHeadroom = 64 << 20

// gcPercentFor is the GOGC that gives a live heap of live bytes gcHeadroom
// of room, and never less than Go's default 100.
func gcPercentFor(live uint64) int {
	const minLive = 4 << 20 // the runtime's own floor for the heap goal
	live = max(live, minLive)
	return max(100, int(gcHeadroom*100/live))
}

// keepGCHeadroom sets GOGC from the live heap now and every second until
// ctx ends, unless the environment sets GOGC: the operator's choice
// stands. GOMEMLIMIT, when set, bounds the heap as ever.
func keepGCHeadroom(ctx context.Context) {
	if _, ok := os.LookupEnv("GOGC"); ok {
		return
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	set := 100
	apply := func() {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		pct := gcPercentFor(sample[0].Value.Uint64())
		// Only a change of a tenth or more is worth telling the runtime.
		if d := pct - set; d*10 > set || -d*10 > set {
			debug.SetGCPercent(pct)
			set = pct
		}
	}
	apply()
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				apply()
			}
		}
	}()
}
