package main

import (
	"context"
	"strings"
	"testing"
)

// TestBlockCacheFlagRefusesWhatIsNotASize: --block-cache-mb takes MiB from 1
// up, and serve stops before opening anything when it gets less.
func TestBlockCacheFlagRefusesWhatIsNotASize(t *testing.T) {
	// Cancelled: a serve that took the value would stop at once, not serve.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, v := range []string{"0", "-5", "1048577"} {
		err := serve(ctx, []string{"--data", t.TempDir(), "--block-cache-mb", v})
		if err == nil || !strings.Contains(err.Error(), "--block-cache-mb") {
			t.Errorf("--block-cache-mb %s: serve returned %v, want an error naming the flag", v, err)
		}
	}
}

// TestWALMinSyncIntervalFlagRefusesWhatIsNotAnInterval:
// --wal-min-sync-interval takes a duration from 0 to 1s, and serve stops
// before opening anything when it gets another.
func TestWALMinSyncIntervalFlagRefusesWhatIsNotAnInterval(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, v := range []string{"-1ms", "2s", "500"} {
		err := serve(ctx, []string{"--data", t.TempDir(), "--wal-min-sync-interval", v})
		if err == nil || !strings.Contains(err.Error(), "wal-min-sync-interval") {
			t.Errorf("--wal-min-sync-interval %s: serve returned %v, want an error naming the flag", v, err)
		}
	}
}
