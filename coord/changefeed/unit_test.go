package changefeed

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// simulate runs rounds of the balancing strategy over n leases for the given
// instances (each round every instance acts once, in turn, as the processor
// does every acquire interval) and returns the ownership.
func simulate(leases []*Lease, instances []string, dead map[string]bool, rounds int) map[string]int {
	for range rounds {
		for _, me := range instances {
			if dead[me] {
				continue
			}
			for _, l := range balance(leases, me, func(l *Lease) bool { return dead[l.Owner] }) {
				l.Owner = me
			}
		}
	}
	m := map[string]int{}
	for _, l := range leases {
		m[l.Owner]++
	}
	return m
}

func TestBalanceConvergesToEvenShares(t *testing.T) {
	var leases []*Lease
	for i := range 16 {
		leases = append(leases, &Lease{ID: fmt.Sprint(i)})
	}
	names := []string{"a", "b", "c", "d"}
	// "a" starts alone and takes everything; the others join and steal one
	// lease per round until each holds 4.
	got := simulate(leases, names[:1], nil, 1)
	if got["a"] != 16 {
		t.Fatalf("a single instance holds %v", got)
	}
	got = simulate(leases, names, nil, 20)
	if want := map[string]int{"a": 4, "b": 4, "c": 4, "d": 4}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after 20 rounds: %v, want %v", got, want)
	}
	// Stable: more rounds change nothing.
	before := make([]string, len(leases))
	for i, l := range leases {
		before[i] = l.Owner
	}
	simulate(leases, names, nil, 10)
	for i, l := range leases {
		if l.Owner != before[i] {
			t.Fatalf("lease %d moved from %s to %s in a balanced fleet", i, before[i], l.Owner)
		}
	}
	// "b" dies: its leases expire and the survivors share 16 as 6/5/5.
	got = simulate(leases, names, map[string]bool{"b": true}, 20)
	if got["b"] != 0 || got["a"]+got["c"]+got["d"] != 16 {
		t.Fatalf("after b died: %v", got)
	}
	for _, n := range []string{"a", "c", "d"} {
		if got[n] < 5 || got[n] > 6 {
			t.Fatalf("after b died: %v, want 5 or 6 each", got)
		}
	}
}

func TestBalanceStealsOneAtATimeAndNeverPingPongs(t *testing.T) {
	leases := []*Lease{{ID: "0", Owner: "a"}}
	if got := balance(leases, "b", func(*Lease) bool { return false }); got != nil {
		t.Fatalf("b steals the only lease from a: %v", got)
	}
	leases = nil
	for i := range 8 {
		leases = append(leases, &Lease{ID: fmt.Sprint(i), Owner: "a"})
	}
	got := balance(leases, "b", func(*Lease) bool { return false })
	if len(got) != 1 {
		t.Fatalf("b takes %d leases in one round, want 1", len(got))
	}
}

func TestSplitFromTokenGivesEachChildItsPosition(t *testing.T) {
	parent := azcosmos.FeedRange{MinInclusive: "", MaxExclusive: "FF"}
	e1, e2 := `"120"`, `"97"`
	tok := feedToken{Continuation: []tokenRange{{Min: "7F", Max: "FF", Token: &e2}, {Min: "", Max: "7F", Token: &e1}}}
	got := splitFromToken(parent, `"97"`, tok)
	want := []childRange{
		{Range: azcosmos.FeedRange{MinInclusive: "", MaxExclusive: "7F"}, Continuation: `"120"`},
		{Range: azcosmos.FeedRange{MinInclusive: "7F", MaxExclusive: "FF"}, Continuation: `"97"`},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("children %v, want %v", got, want)
	}
	same := feedToken{Continuation: []tokenRange{{Min: "", Max: "FF", Token: &e1}}}
	if got := splitFromToken(parent, `"97"`, same); got != nil {
		t.Fatalf("an unsplit range gives children %v", got)
	}
}

func TestSplitFromRangesClampsToTheLeaseAndKeepsItsContinuation(t *testing.T) {
	parent := azcosmos.FeedRange{MinInclusive: "3F", MaxExclusive: "BF"}
	current := []azcosmos.FeedRange{{MinInclusive: "", MaxExclusive: "3F"}, {MinInclusive: "3F", MaxExclusive: "7F"},
		{MinInclusive: "7F", MaxExclusive: "FF"}}
	got := splitFromRanges(parent, `"5"`, current)
	want := []childRange{
		{Range: azcosmos.FeedRange{MinInclusive: "3F", MaxExclusive: "7F"}, Continuation: `"5"`},
		{Range: azcosmos.FeedRange{MinInclusive: "7F", MaxExclusive: "BF"}, Continuation: `"5"`},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("children %v, want %v", got, want)
	}
	if got := splitFromRanges(parent, `"5"`, []azcosmos.FeedRange{{MinInclusive: "", MaxExclusive: "FF"}}); got != nil {
		t.Fatalf("a lease inside one range gives children %v", got)
	}
}

func TestLeaseDocumentHasTheDotNetShape(t *testing.T) {
	st := &store{prefix: leasePrefix("proc", "acct.documents.azure.com", "bf8uALgoqxk=")}
	l := st.newLease(azcosmos.FeedRange{MinInclusive: "", MaxExclusive: "FF"}, `"11"`, "host-1", nil)
	l.Timestamp = time.Date(2024, 7, 24, 10, 15, 30, 0, time.UTC)
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	want := map[string]any{
		"id":                "procacct.documents.azure.com_bf8uAA==_bf8uALgoqxk=..-FF",
		"partitionKey":      "procacct.documents.azure.com_bf8uAA==_bf8uALgoqxk=..-FF",
		"version":           1.0,
		"LeaseToken":        "-FF",
		"FeedRange":         map[string]any{"Range": map[string]any{"min": "", "max": "FF"}},
		"Owner":             "host-1",
		"ContinuationToken": `"11"`,
		"properties":        map[string]any{},
		"timestamp":         "2024-07-24T10:15:30.0000000Z",
		"Mode":              "Incremental Feed",
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("lease document\n%s\nwant\n%v", b, want)
	}
	// Released: Owner is null, as .NET writes it.
	l.Owner = ""
	b, _ = json.Marshal(l)
	_ = json.Unmarshal(b, &m)
	if v, ok := m["Owner"]; !ok || v != nil {
		t.Fatalf("released lease Owner = %v (present %v), want null", v, ok)
	}
}

func TestLeaseReadsDotNetAndJavaDocuments(t *testing.T) {
	dotnet := `{"id":"p..0","version":0,"_etag":"\"0a00\"","LeaseToken":"0","PartitionId":"0",
		"FeedRange":{"Range":{"min":"","max":"FF"}},"Owner":"host-1","ContinuationToken":"\"11\"",
		"properties":{"k":"v"},"timestamp":"2024-07-24T10:15:30.1234567Z","_ts":1721816130,"Mode":"Incremental Feed"}`
	var l Lease
	if err := json.Unmarshal([]byte(dotnet), &l); err != nil {
		t.Fatal(err)
	}
	r, ok := l.Range()
	if !ok || r.MaxExclusive != "FF" || l.Owner != "host-1" || l.ContinuationToken != `"11"` || l.Properties["k"] != "v" ||
		l.ETag != `"0a00"` || l.Timestamp.Year() != 2024 {
		t.Fatalf("read %+v", l)
	}
	// Unknown properties survive a rewrite.
	b, _ := json.Marshal(l)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if m["PartitionId"] != "0" {
		t.Fatalf("PartitionId lost on rewrite: %s", b)
	}
	state := base64.StdEncoding.EncodeToString([]byte(`{"V":1,"Mode":"INCREMENTAL","StartFrom":{"Type":"BEGINNING"},` +
		`"Continuation":{"V":1,"Continuation":[{"token":"\"11\"","range":{"min":"","max":"FF"}}]}}`))
	java := `{"id":"p..-FF","LeaseToken":"-FF","ContinuationToken":"` + state + `","timestamp":"2022-11-15T17:43:34.634427Z",
		"Owner":null,"version":1,"feedRange":{"Range":{"min":"","max":"FF","isMinInclusive":true,"isMaxInclusive":false}}}`
	var j Lease
	if err := json.Unmarshal([]byte(java), &j); err != nil {
		t.Fatal(err)
	}
	if r, ok := j.Range(); !ok || r.MaxExclusive != "FF" || j.ContinuationToken != `"11"` || j.Owner != "" {
		t.Fatalf("read Java lease %+v", j)
	}
	// Rewritten, it has the .NET shape: FeedRange, an object of properties.
	b, _ = json.Marshal(j)
	m = nil
	_ = json.Unmarshal(b, &m)
	if _, ok := m["FeedRange"]; !ok || m["properties"] == nil {
		t.Fatalf("rewritten Java lease: %s", b)
	}
}
