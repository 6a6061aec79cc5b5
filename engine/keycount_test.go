package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
)

// keyCountingStore counts, per key family (its first byte), the Set and
// Delete operations of the batches committed while recording is on.
type keyCountingStore struct {
	storage.Store
	mu        sync.Mutex
	recording bool
	sets      map[byte]int
	deletes   map[byte]int
	bytes     int // of the keys and values set
}

func (s *keyCountingStore) NewBatch() storage.Batch {
	return &keyCountingBatch{Batch: s.Store.NewBatch(), s: s}
}

// start begins a count from zero.
func (s *keyCountingStore) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recording, s.sets, s.deletes, s.bytes = true, map[byte]int{}, map[byte]int{}, 0
}

// stop ends the count and returns it as "family:sets/deletes ... (n bytes
// set)" and the total number of operations.
func (s *keyCountingStore) stop() (string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recording = false
	var fams []byte
	for f := range s.sets {
		fams = append(fams, f)
	}
	for f := range s.deletes {
		if _, ok := s.sets[f]; !ok {
			fams = append(fams, f)
		}
	}
	slices.Sort(fams)
	var out []string
	total := 0
	for _, f := range fams {
		out = append(out, fmt.Sprintf("%c:%d/%d", f, s.sets[f], s.deletes[f]))
		total += s.sets[f] + s.deletes[f]
	}
	return fmt.Sprintf("%s, %d bytes set", strings.Join(out, " "), s.bytes), total
}

type keyCountingBatch struct {
	storage.Batch
	s         *keyCountingStore
	sets, del []byte
	bytes     int
}

func (b *keyCountingBatch) Set(k, v []byte) error {
	b.sets = append(b.sets, k[0])
	b.bytes += len(k) + len(v)
	return b.Batch.Set(k, v)
}

func (b *keyCountingBatch) Delete(k []byte) error {
	b.del = append(b.del, k[0])
	return b.Batch.Delete(k)
}

func (b *keyCountingBatch) note() {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	if !b.s.recording {
		return
	}
	for _, f := range b.sets {
		b.s.sets[f]++
	}
	for _, f := range b.del {
		b.s.deletes[f]++
	}
	b.s.bytes += b.bytes
}

func (b *keyCountingBatch) Commit(ctx context.Context) error { b.note(); return b.Batch.Commit(ctx) }

func (b *keyCountingBatch) CommitPipelined(ctx context.Context) (func() error, error) {
	b.note()
	return b.Batch.CommitPipelined(ctx)
}

// benchDoc is a document shaped as the server benchmark's (about 300
// bytes; cmd/orrery's benchDoc), in partition p1.
func benchDoc(id string, n int) string {
	return fmt.Sprintf(`{"id":%q,"pk":"p1","n":%d,"tags":["a","b","c"],"nested":{"x":%d,"y":"yy"},"payload":%q}`,
		id, n, n%7, strings.Repeat("x", 200))
}

// TestAWriteWithoutTTLWritesNoExpiryKey: in a container without
// defaultTtl, a new item and a replace of it write no expiry key, whatever
// the item's own ttl (which such a container ignores). The keys each write
// makes are logged by family (sets/deletes): for the server benchmark's
// document, a create writes the item, its feed entry, 9 index entries, its
// creation-order and RID entries; a replace in a later second that changes
// n the item, its feed entry (one deleted, one set) and the index entries
// of /n, /nested/x and /_ts (each deleted and set).
func TestAWriteWithoutTTLWritesNoExpiryKey(t *testing.T) {
	ctx := t.Context()
	s := &keyCountingStore{Store: memory.New()}
	defer s.Close()
	clock := newTestClock()
	e, err := Open(ctx, s, Options{Now: clock.now, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	writes := []struct{ name, body string }{
		{"create", benchDoc("a", 1)},
		{"replace in the same second", benchDoc("a", 2)},
		{"replace a second later", benchDoc("a", 3)},
		{"create with an own ttl", `{"id":"b","pk":"p1","ttl":5}`},
		{"replace with an own ttl a second later", `{"id":"b","pk":"p1","ttl":6}`},
	}
	for _, w := range writes {
		if strings.Contains(w.name, "a second later") {
			clock.advance(time.Second)
		}
		s.start()
		upsert(t, e, "c", w.body)
		got, n := s.stop()
		t.Logf("%s: %d keys (%s)", w.name, n, got)
		if strings.Contains(got, string(keys.Expiry)+":") {
			t.Errorf("%s wrote expiry keys: %s", w.name, got)
		}
	}
	c, _ := e.Container(ctx, "db", "c")
	if n := countPrefix(t, e, keys.ExpiryPrefix(c.rid)); n != 0 {
		t.Errorf("%d expiry entries in a container without TTL, want 0", n)
	}
}
