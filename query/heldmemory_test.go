package query

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestHeldMemoryStaysWithinTheLimit runs GROUP BY, DISTINCT, ORDER BY and
// aggregates that keep a small value from each of many large documents.
// Whether the query finishes or is stopped at its memory limit, the live
// heap it holds while it runs, measured after a collection every few
// hundred documents, stays within the limit and some slack: what it keeps
// must not pin the documents it was read from, which the charge does not
// count.
func TestHeldMemoryStaysWithinTheLimit(t *testing.T) {
	const (
		limit = 4 << 20
		docs  = 12000
		pad   = 4000 // each document's text is about 4 KB: 48 MB in all
	)
	texts := make([][]byte, docs)
	filler := strings.Repeat("p", pad)
	for i := range texts {
		texts[i] = []byte(fmt.Sprintf(`{"id":"d%d","k":"key-%d","n":%d,"pad":"%s","o":{"s":"s%d"}}`, i, i, i, filler, i))
	}
	for _, text := range []string{
		"SELECT c.k, COUNT(1) AS n FROM c GROUP BY c.k",
		"SELECT c.k AS k FROM c GROUP BY c.k",
		"SELECT DISTINCT c.k FROM c",
		"SELECT DISTINCT VALUE c.o.s FROM c",
		"SELECT c.k FROM c ORDER BY c.n DESC",
		"SELECT TOP 20000 c.k FROM c ORDER BY c.k",
		"SELECT VALUE MAKELIST(c.k) FROM c",
		"SELECT VALUE MAX(c.k) FROM c",
	} {
		x := prepare(t, text, Options{MaxMemory: limit})
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		var peak uint64
		measured := func(yield func([]byte, error) bool) {
			for i, d := range texts {
				if !yield(d, nil) {
					return
				}
				if i%500 == 499 {
					runtime.GC()
					runtime.ReadMemStats(&ms)
					if ms.HeapAlloc > base && ms.HeapAlloc-base > peak {
						peak = ms.HeapAlloc - base
					}
				}
			}
		}
		_, err := x.Execute(measured)
		var qe *Error
		if err != nil && !(errors.As(err, &qe) && strings.Contains(qe.Message, "maximum allowed memory usage")) {
			t.Errorf("%s: %v", text, err)
			continue
		}
		// The charge estimates Go's structures; twice the limit and a few
		// megabytes of runtime noise is the bound, far below the 48 MB of
		// documents a pinning query holds.
		if bound := uint64(2*limit + 6<<20); peak > bound {
			t.Errorf("%s: held %.1f MiB of live heap under a %d MiB limit (err %v)", text, float64(peak)/(1<<20), limit>>20, err)
		} else {
			t.Logf("%s: peak %.1f MiB held, err %v", text, float64(peak)/(1<<20), err)
		}
	}
}
