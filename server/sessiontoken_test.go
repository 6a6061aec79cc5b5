package server

import (
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestASessionTokenIsItsRangeAndTheWatermarkItWasGiven holds the session
// token every answer carries: the request's partition key range id ("0"
// when absent or not a number) and the watermark it was given, whatever
// token another request formatted before or at the same time; and a
// request at the watermark of the one before sets it without formatting
// it again (no allocation).
func TestASessionTokenIsItsRangeAndTheWatermarkItWasGiven(t *testing.T) {
	s := &Server{}
	ids := []string{"", "0", "3", "17", "x", " 3 ", "-1"}
	want := func(id string, lsn uint64) string {
		switch id {
		case "3", " 3 ":
			return fmt.Sprintf("3:-1#%d", lsn)
		case "17":
			return fmt.Sprintf("17:-1#%d", lsn)
		}
		return fmt.Sprintf("0:-1#%d", lsn)
	}
	one := func(rng *rand.Rand) error {
		id, lsn := ids[rng.IntN(len(ids))], uint64(1+rng.IntN(4))
		hr := httptest.NewRequest("GET", "/dbs/d/colls/c/docs/x", nil)
		if id != "" {
			hr.Header.Set("X-Ms-Documentdb-Partitionkeyrangeid", id)
		}
		w := httptest.NewRecorder()
		r := &request{Request: hr, w: w}
		for range 1 + rng.IntN(2) { // a request may set it twice
			if err := s.setSessionLSN(r, lsn); err != nil {
				return err
			}
			if got := w.Header()["X-Ms-Session-Token"]; len(got) != 1 || got[0] != want(id, lsn) {
				return fmt.Errorf("range %q at %d: token %q, want %q", id, lsn, got, want(id, lsn))
			}
		}
		return nil
	}
	rng := rand.New(rand.NewPCG(25, 43))
	for range 2000 {
		if err := one(rng); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 25))
			for range 2000 {
				if err := one(rng); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	hr := httptest.NewRequest("GET", "/dbs/d/colls/c/docs/x", nil)
	w := httptest.NewRecorder()
	_ = s.setSessionLSN(&request{Request: hr, w: w}, 99)
	r := &request{Request: hr, w: w}
	if n := testing.AllocsPerRun(100, func() { _ = s.setSessionLSN(r, 99) }); n != 0 {
		t.Errorf("a token at the watermark of the request before took %v allocations, want 0", n)
	}
}

// TestASessionTokensTextNeverChangesOnceAnswered: a token is formatted in
// its request's allocation and published from there, where another request
// may take its text at any time; a second token the same request sets (at
// another watermark) is formatted elsewhere, so every text answered keeps
// its value.
func TestASessionTokensTextNeverChangesOnceAnswered(t *testing.T) {
	s := &Server{}
	hr := httptest.NewRequest("GET", "/dbs/d/colls/c/docs/x", nil)
	w := httptest.NewRecorder()
	r := &request{Request: hr, w: w}
	var answered []string
	lsns := []uint64{5, 123456789, 7}
	for _, lsn := range lsns {
		if err := s.setSessionLSN(r, lsn); err != nil {
			t.Fatal(err)
		}
		answered = append(answered, w.Header().Get("X-Ms-Session-Token"))
		// Another request at this watermark takes the published text.
		w2 := httptest.NewRecorder()
		if err := s.setSessionLSN(&request{Request: hr, w: w2}, lsn); err != nil {
			t.Fatal(err)
		}
		answered = append(answered, w2.Header().Get("X-Ms-Session-Token"))
	}
	for i, got := range answered {
		if want := fmt.Sprintf("0:-1#%d", lsns[i/2]); got != want {
			t.Errorf("token %d: %q, want %q", i, got, want)
		}
	}
}
