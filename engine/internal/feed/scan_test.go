package feed

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
)

// write commits the key-value pairs kv (key, value, key, value, …).
func write(t *testing.T, s storage.Store, kv ...[]byte) {
	t.Helper()
	b := s.NewBatch()
	defer b.Close()
	for i := 0; i < len(kv); i += 2 {
		if err := b.Set(kv[i], kv[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestPageEndsBetweenSequenceNumbers: pages of the change log, read one
// after the other from each one's position, report every record once and
// in order, and never split the records one transaction (one sequence
// number) wrote, even when they overflow the page size.
func TestPageEndsBetweenSequenceNumbers(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	defer s.Close()
	c := Container{RID: coll, Paths: []string{"/pk"}}
	perLSN := []int{3, 2, 1, 4} // records of sequence numbers 1, 2, 3, 4
	var want []string
	for i, n := range perLSN {
		lsn := uint64(i + 1)
		for j := range n {
			id := fmt.Sprintf("%d.%d", lsn, j)
			r := &Record{Op: Create, Crts: 1, ItemKey: itemKey(1, `["p"]`, id), Doc: []byte(`{"id":"` + id + `"}`)}
			write(t, s, keys.VersionKey(coll, lsn, uint32(j)), r.Encode())
			want = append(want, id)
		}
	}
	scope := &Scope{C: c}
	var got []string
	pos, pages := uint64(0), 0
	for ; pos < 4; pages++ {
		if pages > 10 {
			t.Fatal("the pages do not advance")
		}
		p := &Page{Size: 2, Position: pos}
		if err := ScanVersions(ctx, s, scope, pos, 4, 0, p); err != nil {
			t.Fatal(err)
		}
		lsns := map[uint64]int{}
		for _, doc := range p.Items {
			var rec struct {
				Current  struct{ ID string }
				Metadata struct{ LSN uint64 }
			}
			if err := json.Unmarshal(doc, &rec); err != nil {
				t.Fatal(err)
			}
			id, lsn := rec.Current.ID, rec.Metadata.LSN
			got = append(got, id)
			lsns[lsn]++
		}
		for lsn, n := range lsns {
			if n != perLSN[lsn-1] {
				t.Fatalf("page %d holds %d of the %d records of sequence number %d", pages, n, perLSN[lsn-1], lsn)
			}
			if lsn > p.Position {
				t.Fatalf("page %d holds sequence number %d beyond its position %d", pages, lsn, p.Position)
			}
		}
		if p.Position <= pos {
			t.Fatalf("page %d stays at %d", pages, pos)
		}
		pos = p.Position
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records %v, want %v", got, want)
	}
}

// TestScanReportsOnlyItsScope: records of another logical partition, out
// of the range or made before the start time are passed over, and the
// page still covers the whole span read.
func TestScanReportsOnlyItsScope(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	defer s.Close()
	c := Container{RID: coll, Paths: []string{"/pk"}}
	epk := func(b byte) []byte { return append([]byte{b}, make([]byte, 15)...) }
	in := append(keys.ItemPartitionPrefix(coll, epk(0x10), []byte(`["in"]`)), "a"...)
	other := append(keys.ItemPartitionPrefix(coll, epk(0x90), []byte(`["out"]`)), "b"...)
	for lsn, r := range []*Record{
		{Op: Create, Crts: 50, ItemKey: in, Doc: []byte(`{"id":"early"}`)},
		{Op: Create, Crts: 100, ItemKey: other, Doc: []byte(`{"id":"other"}`)},
		{Op: Create, Crts: 100, ItemKey: in, Doc: []byte(`{"id":"kept"}`)},
	} {
		write(t, s, keys.VersionKey(coll, uint64(lsn+1), 0), r.Encode())
	}
	for name, scope := range map[string]*Scope{
		"partition": {C: c, Prefix: keys.ItemPartitionPrefix(coll, epk(0x10), []byte(`["in"]`))},
		"range":     {C: c, InRange: func(e []byte) bool { return e[0] < 0x80 }},
	} {
		p := &Page{Size: 10}
		if err := ScanVersions(ctx, s, scope, 0, 3, 100, p); err != nil {
			t.Fatal(err)
		}
		if len(p.Items) != 1 || string(p.Items[0][:len(`{"current":{"id":"kept"}`)]) != `{"current":{"id":"kept"}` {
			t.Fatalf("%s: items %q", name, p.Items)
		}
		if p.Position != 3 || p.Capped || p.Examined != 1 || p.Scanned != 3 {
			t.Fatalf("%s: position %d capped %v examined %d scanned %d", name, p.Position, p.Capped, p.Examined, p.Scanned)
		}
	}
}

// manyGetter counts the chunks a reader of many keys at once is asked for.
type manyGetter struct {
	storage.Reader
	calls []int
}

func (m *manyGetter) GetMany(ctx context.Context, ks [][]byte) ([][]byte, error) {
	m.calls = append(m.calls, len(ks))
	return storage.GetMany(ctx, m.Reader, ks)
}

// TestScanLatestReadsItemsInChunks: the latest-version scan reads the items
// its entries name in chunks, a small first one then larger ones, from a
// reader that reads many keys at once; an entry whose item is gone counts
// as examined but adds nothing, and one out of scope is not read at all.
func TestScanLatestReadsItemsInChunks(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	defer s.Close()
	c := Container{RID: coll, Paths: []string{"/pk"}}
	epk := make([]byte, 16)
	const n = 300
	for i := range n {
		lsn := uint64(i + 1)
		rid := binary.BigEndian.AppendUint64(nil, lsn)
		k := append(keys.ItemPartitionPrefix(coll, epk, []byte(`["p"]`)), fmt.Sprintf("%03d", i)...)
		if i%10 == 5 {
			k = append(keys.ItemPartitionPrefix(coll, epk, []byte(`["q"]`)), fmt.Sprintf("%03d", i)...)
		}
		write(t, s, keys.FeedKey(coll, lsn, rid), k)
		if i%10 != 7 { // every tenth item from the 8th on is gone
			write(t, s, k, []byte(fmt.Sprintf(`{"id":"%03d"}`, i)))
		}
	}
	r := &manyGetter{Reader: s}
	scope := &Scope{C: c, Prefix: keys.ItemPartitionPrefix(coll, epk, []byte(`["p"]`))}
	p := &Page{Size: 1000}
	read := 0
	err := ScanLatest(ctx, r, scope, 0, n, p, func(itemKey, v []byte) ([]byte, error) {
		read++
		return WithLSN(v, 1), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Position != n || p.Capped || p.Scanned != n || p.Examined != n-n/10 || read != n-2*n/10 || len(p.Items) != read {
		t.Fatalf("position %d capped %v scanned %d examined %d read %d items %d", p.Position, p.Capped, p.Scanned, p.Examined, read, len(p.Items))
	}
	if len(r.calls) < 2 || r.calls[0] != 32 || r.calls[1] != n-n/10-32 {
		t.Fatalf("items read in chunks of %v, want 32 then the rest", r.calls)
	}
}
