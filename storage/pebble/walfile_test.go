package pebble

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// sizeAtSyncFS records, for every sync of a write-ahead log file, whether
// the file's size changed since the file's previous sync (or its opening).
type sizeAtSyncFS struct {
	vfs.FS
	mu           *sync.Mutex
	syncs, grown *int
}

func (fs sizeAtSyncFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !isWAL(name) {
		return f, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &sizeAtSyncFile{File: f, fs: fs, last: st.Size()}, nil
}

func (fs sizeAtSyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs sizeAtSyncFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

type sizeAtSyncFile struct {
	vfs.File
	fs   sizeAtSyncFS
	last int64
}

func (f *sizeAtSyncFile) SyncData() error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	f.fs.mu.Lock()
	*f.fs.syncs++
	if st.Size() != f.last {
		*f.fs.grown++
	}
	f.fs.mu.Unlock()
	f.last = st.Size()
	return f.File.SyncData()
}

func (f *sizeAtSyncFile) Sync() error { return f.SyncData() }

// TestWALSyncsRarelyCarryANewFileSize: a sync of the write-ahead log
// carries a new file size (on ext4, a synchronous write of the file's
// inode besides the data) only when a commit has run past the zeros the
// log was extended with, once per walZeroAhead bytes, not at every sync
// as when the log grows with each write.
func TestWALSyncsRarelyCarryANewFileSize(t *testing.T) {
	ctx := t.Context()
	var mu sync.Mutex
	var syncs, grown int
	s, err := Open(t.TempDir(), Options{fs: sizeAtSyncFS{FS: vfs.Default, mu: &mu, syncs: &syncs, grown: &grown}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	value := make([]byte, 3000)
	const commits = 400
	for i := range commits {
		b := s.NewBatch()
		if err := b.Set(fmt.Appendf(nil, "k%06d", i), value); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d syncs of the log, %d with a new file size", syncs, grown)
	if syncs < commits {
		t.Fatalf("%d syncs of the log for %d serial synced commits: the file system saw no log", syncs, commits)
	}
	// 400 × ~3 KB is ~1.2 MB: two extensions of the log (with slack: the
	// syncs Pebble makes of its own).
	if grown > 5 {
		t.Errorf("%d of %d syncs carried a new file size, want at most 5", grown, syncs)
	}
}

// TestLogsWrittenAheadWithZerosReplayAfterACrash: every acknowledged commit
// survives a machine's crash while the logs end in written zeros, across
// log rotations (new logs and recycled ones, whose old contents Pebble
// overwrites): the state a crash would leave opens, and holds them all.
func TestLogsWrittenAheadWithZerosReplayAfterACrash(t *testing.T) {
	ctx := t.Context()
	mem := vfs.NewCrashableMem()
	fs := &reuseCountingFS{FS: mem}
	// Small memtables: the log rotates every few hundred commits, and
	// obsolete logs are recycled.
	s, err := Open("db", Options{fs: fs, MemTableSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	value := make([]byte, 1000)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	n := 0
	for round := range 6 {
		for range 400 {
			b := s.NewBatch()
			if err := b.Set(fmt.Appendf(nil, "k%06d", n), value); err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			b.Close()
			n++
		}
		c, err := Open("db", Options{fs: mem.CrashClone(vfs.CrashCloneCfg{})})
		if err != nil {
			t.Fatalf("round %d: opening the state a crash would leave: %v", round, err)
		}
		for i := range n {
			if _, err := c.Get(ctx, fmt.Appendf(nil, "k%06d", i)); err != nil {
				t.Errorf("round %d: acknowledged commit k%06d: %v", round, i, err)
				break
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d commits, %d flushes, %d logs recycled", n, s.db.Metrics().Flush.Count, fs.reused.Load())
	if fs.reused.Load() == 0 {
		t.Error("no log was recycled: the test did not reach the case")
	}
}

// reuseCountingFS counts the recycled logs Pebble reopens for writing.
type reuseCountingFS struct {
	vfs.FS
	reused atomic.Int64
}

func (fs *reuseCountingFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	if err == nil && isWAL(newname) {
		fs.reused.Add(1)
	}
	return f, err
}
