package pkranges

import (
	"strconv"
	"testing"
)

func TestNewCutsTheKeySpaceIntoAdjacentRangesOfEqualWidth(t *testing.T) {
	if New(1, 0) != Single || New(0, 0) != Single {
		t.Error("one range is the single range")
	}
	set := New(3, 42)
	want := []string{"", "15555555555555555555555555555555", "2AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "FF"}
	if len(set.Ranges) != 3 || set.NextID != 3 || set.Version != 1 {
		t.Fatalf("New(3) = %+v", set)
	}
	for i, r := range set.Ranges {
		if r.ID != strconv.Itoa(i) || r.MinInclusive != want[i] || r.MaxExclusive != want[i+1] || r.TS != 42 {
			t.Errorf("range %d = %+v, want [%s, %s)", i, r, want[i], want[i+1])
		}
	}
}

func TestBoundariesReadBackAsTheyAreWritten(t *testing.T) {
	for _, s := range []string{"15555555555555555555555555555555", "00000000000000000000000000000001"} {
		v, ok := ParseBoundary(s, false)
		if !ok || FormatBoundary(v) != s {
			t.Errorf("%s reads back as %s (%v)", s, FormatBoundary(v), ok)
		}
	}
	if v, ok := ParseBoundary("", false); !ok || v.Sign() != 0 {
		t.Error(`"" is the start of the key space`)
	}
	if v, ok := ParseBoundary("FF", true); !ok || v.Cmp(epkSpace) != 0 {
		t.Error(`"FF" as an upper end is the end of the V2 space`)
	}
	if v, ok := ParseBoundary("2A", false); !ok || FormatBoundary(v) != "2A000000000000000000000000000000" {
		t.Error("a short boundary is padded with zeros")
	}
	if _, ok := ParseBoundary("zz", false); ok {
		t.Error("a boundary that is not hex is read")
	}
}
