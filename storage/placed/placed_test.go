package placed

import (
	"testing"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/storagetest"
)

// byParity puts a key in the place its last byte's parity names: two
// places, every span in both. The conformance suite's batches write keys
// that end alike (x/1, y/1, z/1), as a transaction of one range writes
// keys of one place.
type byParity struct{}

func (byParity) Key(key, _ []byte) int {
	if len(key) == 0 {
		return 0
	}
	return int(key[len(key)-1] % 2)
}

func (byParity) Span([]byte, []byte) int { return Anywhere }

func twoPlaces(a, b storage.Shared) *Store {
	s := New(a, b)
	s.SetRouter(byParity{})
	return s
}

// A store over two places whose keys alternate between them keeps the
// contract of one store: reads merge the places in key order.
func TestTwoPlacesActAsOneStore(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		return twoPlaces(memory.NewShared(), memory.NewShared())
	})
}

// Through a Store over two places, two openers of the same places share
// locks, sequence numbers and watermarks as one shared store.
func TestTwoPlacesActAsOneSharedStore(t *testing.T) {
	storagetest.RunShared(t, func(t *testing.T) (storage.Shared, storage.Shared, func(storage.Shared)) {
		a, b := memory.NewShared(), memory.NewShared()
		return twoPlaces(a, b), twoPlaces(a.Open(), b.Open()), func(s storage.Shared) {
			for _, p := range s.(*Store).places {
				p.(*memory.SharedStore).Sever()
			}
		}
	})
}
