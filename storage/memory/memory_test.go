package memory

import (
	"testing"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/storagetest"
)

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store { return New() })
}

func TestSharedConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store { return NewShared() })
	storagetest.RunShared(t, func(t *testing.T) (storage.Shared, storage.Shared, func(storage.Shared)) {
		a := NewShared()
		return a, a.Open(), func(s storage.Shared) { s.(*SharedStore).Sever() }
	})
}
