package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/orrery-db/orrery/storage"
)

// TestAsErrorTellsTheClientWhatItTold: AsError of no error is no error and
// costs no allocation (the server asks it on every query page); of an
// *Error, wrapped or not, that error; of storage's and a context's errors
// their Cosmos errors; of anything else, nothing.
func TestAsErrorTellsTheClientWhatItTold(t *testing.T) {
	if e, ok := AsError(nil); e != nil || ok {
		t.Errorf("AsError(nil) = %v, %v; want nil, false", e, ok)
	}
	if n := testing.AllocsPerRun(100, func() { AsError(nil) }); n != 0 {
		t.Errorf("AsError(nil) allocates %v times", n)
	}
	nf := NotFound("gone")
	for _, c := range []struct {
		err    error
		status int
		same   bool
	}{
		{nf, 404, true},
		{fmt.Errorf("wrapped: %w", nf), 404, true},
		{storage.ErrExists, 409, false},
		{fmt.Errorf("w: %w", storage.ErrUnavailable), 503, false},
		{context.Canceled, 408, false},
		{context.DeadlineExceeded, 408, false},
		{errors.New("other"), 0, false},
	} {
		e, ok := AsError(c.err)
		if c.status == 0 {
			if ok || e != nil {
				t.Errorf("AsError(%v) = %v, %v; want nothing", c.err, e, ok)
			}
			continue
		}
		if !ok || e.Status != c.status || c.same && e != nf {
			t.Errorf("AsError(%v) = %+v, %v; want status %d", c.err, e, ok, c.status)
		}
	}
}
