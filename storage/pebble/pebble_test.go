package pebble

import (
	"testing"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/storagetest"
)

func TestConformance(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"in memory", Options{InMemory: true}},
		{"on disk", Options{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			storagetest.Run(t, func(t *testing.T) storage.Store {
				s, err := Open(t.TempDir(), tt.opts)
				if err != nil {
					t.Fatal(err)
				}
				return s
			})
		})
	}
}
