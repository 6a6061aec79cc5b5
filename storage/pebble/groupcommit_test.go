package pebble

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// syncCountingFS counts the syncs of write-ahead log files.
type syncCountingFS struct {
	vfs.FS
	syncs *atomic.Int64
	// delay, when set, is added to every sync, as a slower disk would.
	delay time.Duration
}

func (fs syncCountingFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return syncCountingFile{File: f, syncs: fs.syncs, delay: fs.delay}, nil
}

func (fs syncCountingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs syncCountingFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

func (fs syncCountingFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(name, f, err)
}

type syncCountingFile struct {
	vfs.File
	syncs *atomic.Int64
	delay time.Duration
}

func (f syncCountingFile) count() {
	f.syncs.Add(1)
	if f.delay > 0 {
		time.Sleep(f.delay)
	}
}

func (f syncCountingFile) Sync() error {
	f.count()
	return f.File.Sync()
}

func (f syncCountingFile) SyncData() error {
	f.count()
	return f.File.SyncData()
}

func (f syncCountingFile) SyncTo(length int64) (bool, error) {
	f.count()
	return f.File.SyncTo(length)
}

// fakeSyncRate is a rate of sequential synced commits per second above which
// the file system cannot be syncing to a disk (tmpfs, for one); there, commits
// have no reason to wait for each other, and sharing syncs is not checked.
const fakeSyncRate = 50_000

// TestCommitSyncs checks on a real directory that every commit waits for a
// write-ahead log sync, and that concurrent commits share them.
func TestCommitSyncs(t *testing.T) {
	ctx := t.Context()
	const commits = 320
	var sequentialRate float64
	tests := []struct {
		name    string
		noSync  bool
		writers int
		// syncDelay slows every sync down, so that concurrent commits
		// overlap however the machine schedules the writers (on a busy
		// machine a fast disk's syncs may otherwise end before the next
		// writer runs, and nothing would be there to share them).
		syncDelay time.Duration
		check     func(t *testing.T, syncs int64) error
	}{
		{"one writer syncs every commit", false, 1, 0, func(t *testing.T, syncs int64) error {
			if syncs < commits {
				return fmt.Errorf("%d syncs for %d sequential commits, want at least one each", syncs, commits)
			}
			return nil
		}},
		{"concurrent writers share syncs", false, 32, 2 * time.Millisecond, func(t *testing.T, syncs int64) error {
			if sequentialRate > fakeSyncRate {
				t.Skipf("%.0f sequential synced commits/s: the file system does not sync", sequentialRate)
			}
			if syncs > commits/2 {
				return fmt.Errorf("%d syncs for %d commits from 32 writers, want at most %d", syncs, commits, commits/2)
			}
			return nil
		}},
		{"NoSync does not sync commits", true, 1, 0, func(t *testing.T, syncs int64) error {
			if syncs >= commits/2 {
				return fmt.Errorf("%d syncs for %d commits without sync", syncs, commits)
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var syncs atomic.Int64
			s, err := Open(t.TempDir(), Options{NoSync: tt.noSync, fs: syncCountingFS{FS: vfs.Default, syncs: &syncs, delay: tt.syncDelay}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			before := syncs.Load()
			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, commits)
			for w := range tt.writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range commits / tt.writers {
						b := s.NewBatch()
						key := fmt.Appendf(nil, "k/%02d/%04d", w, i)
						if err := b.Set(key, key); err != nil {
							errs <- err
						}
						if err := b.Commit(ctx); err != nil {
							errs <- err
						}
						b.Close()
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			got := syncs.Load() - before
			if tt.writers == 1 && !tt.noSync {
				sequentialRate = commits / time.Since(start).Seconds()
			}
			t.Logf("%d write-ahead log syncs for %d commits from %d writers", got, commits, tt.writers)
			if err := tt.check(t, got); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestMinSyncIntervalMakesConcurrentCommitsShareSyncs: with
// WALMinSyncInterval set, a sync that ends while other commits wait for
// one is followed by the interval, and concurrent commits share syncs; a
// lone writer's commits sync one by one, and at once: Pebble is never told
// to wait after them. Every sync takes a millisecond, so that the 16
// writers' commits overlap however the machine schedules them (with syncs
// that take no time, one writer may run all its commits before the next
// starts, and nothing is concurrent). Counts, not timings.
func TestMinSyncIntervalMakesConcurrentCommitsShareSyncs(t *testing.T) {
	ctx := t.Context()
	const commits = 320
	const interval = 5 * time.Millisecond
	for _, writers := range []int{1, 16} {
		t.Run(fmt.Sprintf("writers=%d", writers), func(t *testing.T) {
			var syncs, waits atomic.Int64
			opts := Options{WALMinSyncInterval: interval, fs: syncCountingFS{FS: vfs.NewMem(), syncs: &syncs, delay: time.Millisecond}}
			opts.tune = countSyncWaits(&waits)
			s, err := Open("db", opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			syncs0, waits0 := syncs.Load(), waits.Load()
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range commits / writers {
						b := s.NewBatch()
						key := fmt.Appendf(nil, "k/%02d/%04d", w, i)
						if err := b.Set(key, key); err != nil {
							t.Error(err)
						}
						if err := b.Commit(ctx); err != nil {
							t.Error(err)
						}
						b.Close()
					}
				}()
			}
			wg.Wait()
			got, waited := syncs.Load()-syncs0, waits.Load()-waits0
			t.Logf("%d syncs for %d commits from %d writers, %d of them followed by a wait", got, commits, writers, waited)
			if writers == 1 {
				if got < commits {
					t.Errorf("%d syncs for %d commits of a lone writer, want one each", got, commits)
				}
				if waited > 0 {
					t.Errorf("a lone writer's syncs were followed by %d waits, want none", waited)
				}
				return
			}
			if got > commits/4 {
				t.Errorf("%d syncs for %d commits from %d writers with a least interval of %v between syncs, want at most %d", got, commits, writers, interval, commits/4)
			}
			if waited == 0 {
				t.Error("no sync was followed by a wait")
			}
		})
	}
}

// countSyncWaits is an Options.tune that counts in waits the syncs after
// which Pebble is told to wait before the next (Options.WALMinSyncInterval).
func countSyncWaits(waits *atomic.Int64) func(*pebbledb.Options) {
	return func(o *pebbledb.Options) {
		min := o.WALMinSyncInterval
		o.WALMinSyncInterval = func() time.Duration {
			d := min()
			if d > 0 {
				waits.Add(1)
			}
			return d
		}
	}
}
