package presence

import (
	"fmt"
	"sync"
	"testing"
)

// TestPresenceFilterNeverForgets adds keys from several goroutines across
// many layer growths: every key added is reported as maybe present, and few
// keys never added are.
func TestPresenceFilterNeverForgets(t *testing.T) {
	f := New()
	const writers, perWriter = 4, 50_000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				f.Add(fmt.Appendf(nil, "key-%d-%d", w, i))
			}
		}()
	}
	wg.Wait()
	if n := len(*f.layers.Load()); n < 3 {
		t.Fatalf("%d layers after %d keys: the filter did not grow", n, writers*perWriter)
	}
	for w := range writers {
		for i := range perWriter {
			if !f.MayContain(fmt.Appendf(nil, "key-%d-%d", w, i)) {
				t.Fatalf("key-%d-%d was added but is reported absent", w, i)
			}
		}
	}
	falsePositives := 0
	const probes = 100_000
	for i := range probes {
		if f.MayContain(fmt.Appendf(nil, "other-%d", i)) {
			falsePositives++
		}
	}
	if rate := float64(falsePositives) / probes; rate > 0.05 {
		t.Errorf("%.1f %% of keys never added are reported maybe present", 100*rate)
	}
	t.Logf("%d layers, %.2f %% false maybe", len(*f.layers.Load()), 100*float64(falsePositives)/probes)
}
