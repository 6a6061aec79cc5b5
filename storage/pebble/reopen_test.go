package pebble

import (
	"errors"
	"testing"

	"github.com/orrery-db/orrery/storage"
)

// TestReopen checks that committed writes survive a clean Close, with and
// without sync, and that InMemory keeps nothing.
func TestReopen(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name     string
		opts     Options
		wantKept bool
	}{
		{"synced", Options{}, true},
		{"not synced", Options{NoSync: true}, true},
		{"in memory", Options{InMemory: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			b := s.NewBatch()
			if err := b.Set([]byte("k"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			b.Close()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open(dir, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			v, err := s.Get(ctx, []byte("k"))
			switch {
			case tt.wantKept && (err != nil || string(v) != "v"):
				t.Errorf("after reopening: Get = %q, %v; want %q", v, err, "v")
			case !tt.wantKept && !errors.Is(err, storage.ErrNotFound):
				t.Errorf("after reopening: Get = %q, %v; want ErrNotFound", v, err)
			}
		})
	}
}
