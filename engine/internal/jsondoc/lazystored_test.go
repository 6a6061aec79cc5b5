package jsondoc

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// storedItem is a stored item of n members: its own and the five system
// properties.
func storedItem(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"id":"a","pk":"p1"`)
	for i := 0; i < n-7; i++ {
		fmt.Fprintf(&b, `,"p%d":[%d,{"x":"y"}]`, i, i)
	}
	b.WriteString(`,"_rid":"r","_self":"s","_etag":"\"e\"","_attachments":"attachments/","_ts":1}`)
	return []byte(b.String())
}

// TestAStoredItemOfUpToSixteenMembersIsDecodedLazilyInTwoAllocations: a
// patch's decode of the stored item it patches makes its object (names,
// values and Raws in one allocation) and its names' buffer, and nothing
// more, for an item of up to 11 properties of its own (16 with the system
// ones); it lists the same members as the decode of an object elsewhere
// (expandAt), for items that fit and items that do not.
func TestAStoredItemOfUpToSixteenMembersIsDecodedLazilyInTwoAllocations(t *testing.T) {
	for _, n := range []int{7, 8, 9, 11, 16, 17, 40} {
		b := storedItem(n)
		got, err := DecodeLazy(b)
		if err != nil {
			t.Fatalf("%d members: %v", n, err)
		}
		want, err := expandAt(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		g, w := got.(*Members), want.(*Members)
		if len(g.Names) != n || !reflect.DeepEqual(g.Names, w.Names) || !reflect.DeepEqual(g.Values, w.Values) {
			t.Fatalf("%d members: DecodeLazy listed %q, expandAt %q", n, g.Names, w.Names)
		}
		if string(AppendValue(nil, got)) != string(b) {
			t.Fatalf("%d members: written back as %s", n, AppendValue(nil, got))
		}
		if n > storedMembers {
			continue
		}
		if a := testing.AllocsPerRun(100, func() { DecodeLazy(b) }); a > 2 {
			t.Errorf("%d members: %.0f allocations, want 2", n, a)
		}
	}
}
