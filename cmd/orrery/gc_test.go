package main

import "testing"

// TestGCHeadroomIsAFloorNotAMultiplier: a small live heap gets gcHeadroom
// of room before a collection; a large one Go's default (as much again),
// never less.
func TestGCHeadroomIsAFloorNotAMultiplier(t *testing.T) {
	for _, c := range []struct {
		live     uint64
		wantRoom uint64 // at least
		maxRoom  uint64
	}{
		{0, gcHeadroom, gcHeadroom * 2},
		{1 << 20, gcHeadroom, gcHeadroom * 2},
		{8 << 20, gcHeadroom, gcHeadroom + 8<<20},
		{64 << 20, 64 << 20, 64<<20 + 1},
		{2 << 30, 2 << 30, 2<<30 + 1},
	} {
		pct := gcPercentFor(c.live)
		live := max(c.live, 4<<20)
		room := live * uint64(pct) / 100
		if pct < 100 || room < c.wantRoom || room >= c.maxRoom {
			t.Errorf("live %d: GOGC %d gives %d bytes of room, want [%d, %d) and GOGC >= 100", c.live, pct, room, c.wantRoom, c.maxRoom)
		}
	}
}
