package pebble

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestAcknowledgedCommitIsSyncedFirst: a commit returns (Commit, or the
// wait of CommitPipelined) only once the write-ahead log holding it is
// synced. Writers commit on a file system that can show what a crash of
// the machine would leave (only synced data); at moments while they run,
// that state is taken and opened, and every commit acknowledged before it
// must be there.
//
// A kill -9 of the process cannot show this: the operating system keeps
// what was written but not synced, so only a machine's crash loses it.
//
// With WALMinSyncInterval set, syncs wait for each other and commits share
// them: each commit is still acknowledged only after the sync holding it.
func TestAcknowledgedCommitIsSyncedFirst(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		pipelined bool
		interval  time.Duration
	}{{false, 0}, {true, 0}, {false, 2 * time.Millisecond}, {true, 2 * time.Millisecond}} {
		pipelined := tc.pipelined
		t.Run(fmt.Sprintf("pipelined=%v,min-sync-interval=%v", pipelined, tc.interval), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			opts := Options{fs: fs, WALMinSyncInterval: tc.interval}
			var waits atomic.Int64 // syncs after which Pebble was told to wait
			if tc.interval > 0 {
				opts.tune = countSyncWaits(&waits)
			}
			s, err := Open("db", opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var mu sync.Mutex
			var acked [][]byte
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						key := fmt.Appendf(nil, "k/%d/%06d", w, i)
						b := s.NewBatch()
						if err := b.Set(key, key); err != nil {
							t.Error(err)
							return
						}
						if pipelined {
							wait, err := b.CommitPipelined(ctx)
							if err == nil {
								err = wait()
							}
							if err != nil {
								t.Error(err)
								return
							}
						} else if err := b.Commit(ctx); err != nil {
							t.Error(err)
							return
						}
						b.Close()
						mu.Lock()
						acked = append(acked, key)
						mu.Unlock()
					}
				}()
			}
			checked := 0
			for range 5 {
				time.Sleep(20 * time.Millisecond)
				mu.Lock()
				before := acked[:len(acked):len(acked)]
				mu.Unlock()
				crashed := fs.CrashClone(vfs.CrashCloneCfg{})
				c, err := Open("db", Options{fs: crashed})
				if err != nil {
					t.Fatalf("opening the state a crash would leave: %v", err)
				}
				lost := 0
				for _, key := range before {
					if _, err := c.Get(ctx, key); err != nil {
						lost++
					}
				}
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				if lost > 0 {
					t.Errorf("%d of %d acknowledged commits missing after a crash", lost, len(before))
				}
				checked += len(before)
			}
			close(stop)
			wg.Wait()
			if checked == 0 {
				t.Fatal("no commit was acknowledged")
			}
			t.Logf("%d acknowledged commits checked across 5 crashes, %d syncs followed by a wait", checked, waits.Load())
			if tc.interval > 0 && waits.Load() == 0 {
				t.Error("no sync was followed by a wait: the interval was never in effect")
			}
		})
	}
}
