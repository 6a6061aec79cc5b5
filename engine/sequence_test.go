package engine

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/orrery-db/orrery/storage/memory"
)

// TestConcurrentSequenceNumbersNeverPassAnOpenOne: writers side by side
// allocating and finishing numbers, some holding a few open at once and
// finishing them out of order, never see the watermark at or past a
// number they have not finished; once all are finished it is the last
// number handed out.
func TestConcurrentSequenceNumbersNeverPassAnOpenOne(t *testing.T) {
	ctx := t.Context()
	s, err := newSequencer(ctx, memory.New())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 38))
			for range 400 {
				open := make([]uint64, 1+r.IntN(3))
				for i := range open {
					n, err := s.allocate(ctx)
					if err != nil {
						errs <- err.Error()
						return
					}
					open[i] = n
				}
				r.Shuffle(len(open), func(i, j int) { open[i], open[j] = open[j], open[i] })
				for i, n := range open {
					for _, m := range open[i:] {
						if wm := watermarkNow(ctx, s); wm >= m {
							errs <- "the watermark passed an open number"
							return
						}
					}
					s.finish(n)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	newest, inflight := s.pending()
	if wm := watermarkNow(ctx, s); wm != newest || inflight != 0 {
		t.Errorf("watermark %d with %d in flight once all finished, want %d and none", wm, inflight, newest)
	}
}
