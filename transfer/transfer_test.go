package transfer_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/transfer"
)

// policyClient is a client of s with transfer.PartitionKeyPolicy, as
// orrery import makes, and any further policies.
func policyClient(t testing.TB, s *orrerytest.Server, extra ...policy.Policy) *azcosmos.Client {
	t.Helper()
	cred, err := azcosmos.NewKeyCredential(s.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := azcosmos.NewClientWithKey(s.Endpoint, cred, &azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{
		PerCallPolicies: append([]policy.Policy{transfer.PartitionKeyPolicy()}, extra...),
		Retry:           policy.RetryOptions{MaxRetries: -1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newContainer creates the container and returns its client through a
// client with transfer.PartitionKeyPolicy.
func newContainer(t testing.TB, s *orrerytest.Server, db, name string, paths ...string) *azcosmos.ContainerClient {
	t.Helper()
	createContainer(t, s, db, name, paths...)
	pc, _ := policyClient(t, s).NewContainer(db, name)
	return pc
}

// createContainer creates the container and returns its client through
// s.Client, which has no policy.
func createContainer(t testing.TB, s *orrerytest.Server, db, name string, paths ...string) *azcosmos.ContainerClient {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: db}, nil); err != nil && !strings.Contains(err.Error(), "409") {
		t.Fatal(err)
	}
	d, _ := s.Client.NewDatabase(db)
	def := azcosmos.PartitionKeyDefinition{Paths: paths}
	if len(paths) > 1 {
		def.Kind = azcosmos.PartitionKeyKindMultiHash
		def.Version = 2
	}
	if _, err := d.CreateContainer(ctx, azcosmos.ContainerProperties{ID: name, PartitionKeyDefinition: def}, nil); err != nil {
		t.Fatal(err)
	}
	c, _ := d.NewContainer(name)
	return c
}

// itemLine is an item with awkward content: escapes, unicode, numbers in
// several spellings, nesting, and members in no particular order.
func itemLine(r *rand.Rand, i, partitions int) string {
	numbers := []string{"1", "-0.5", "1.50", "1e3", "12345678901234567890", "3.141592653589793", "0"}
	strs := []string{`plain`, `tab\tand\nnewline`, `quote \" and \\ backslash`, `\u00e9t\u00e9 and été`, `emoji 🚀`, `</script>`, ``}
	pk := fmt.Sprintf("p%d", r.IntN(partitions))
	switch r.IntN(3) {
	case 0:
		return fmt.Sprintf(`{"id":"item-%d","pk":%q,"n":%s,"s":"%s","nested":{"a":[1,2,{"b":null}],"t":true}}`,
			i, pk, numbers[r.IntN(len(numbers))], strs[r.IntN(len(strs))])
	case 1:
		return fmt.Sprintf(`{"s":"%s","id":"item-%d","arr":[ %s , "x" ],"pk":%q}`,
			strs[r.IntN(len(strs))], i, numbers[r.IntN(len(numbers))], pk)
	default:
		return fmt.Sprintf(`{"pk":%q,"id":"item-%d","empty":{},"list":[],"f":false}`, pk, i)
	}
}

func writeLines(t testing.TB, path string, lines []string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readLines(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func importFile(t testing.TB, c *azcosmos.ContainerClient, path string, opts transfer.ImportOptions) *transfer.Summary {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sum, err := transfer.Import(context.Background(), c, f, opts)
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	return sum
}

func idOfLine(t testing.TB, line string) string {
	var v struct{ ID string }
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		t.Fatal(err)
	}
	return v.ID
}

func jsonEqual(t testing.TB, a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func sorted(lines []string) []string {
	out := slices.Clone(lines)
	slices.Sort(out)
	return out
}

// TestExportThenImportKeepsEveryItemsBytes: items imported, exported,
// imported elsewhere and exported again come out byte for byte as they went
// in (system properties aside), on 100,000 items.
func TestExportThenImportKeepsEveryItemsBytes(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 5_000
	}
	s := orrerytest.Start(t)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	lines := make([]string, n)
	for i := range lines {
		lines[i] = itemLine(r, i, 50)
	}
	in := filepath.Join(dir, "in.jsonl")
	writeLines(t, in, lines)

	a := newContainer(t, s, "db", "a", "/pk")
	sum := importFile(t, a, in, transfer.ImportOptions{Concurrency: 32})
	if sum.Written != int64(n) || sum.Failed != 0 {
		t.Fatalf("import: %s", sum)
	}
	t.Logf("import: %s", sum)

	out1 := filepath.Join(dir, "out1.jsonl")
	esum, err := transfer.ExportFile(context.Background(), a, out1, "", transfer.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("export: %s", esum)
	got := readLines(t, out1)
	if len(got) != n {
		t.Fatalf("exported %d items, want %d", len(got), n)
	}
	// The service keeps values, not their spelling (1e3 comes back as 1000,
	// "\u00e9" as "é"), as Cosmos does: the first export equals the input as
	// JSON; from then on the bytes round-trip exactly.
	byID := map[string]string{}
	for _, l := range lines {
		byID[idOfLine(t, l)] = l
	}
	for _, g := range got {
		if w := byID[idOfLine(t, g)]; !jsonEqual(t, g, w) {
			t.Fatalf("exported item differs:\n got %s\nwant %s", g, w)
		}
	}
	want := sorted(got)

	b := newContainer(t, s, "db", "b", "/pk")
	if sum := importFile(t, b, out1, transfer.ImportOptions{}); sum.Written != int64(n) || sum.Failed != 0 {
		t.Fatalf("re-import: %s", sum)
	}
	var buf bytes.Buffer
	if _, err := transfer.Export(context.Background(), b, &buf, transfer.ExportOptions{Format: transfer.JSONArray}); err != nil {
		t.Fatal(err)
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(buf.Bytes(), &arr); err != nil {
		t.Fatalf("the JSON array export does not parse: %v", err)
	}
	again := make([]string, len(arr))
	for i, raw := range arr {
		again[i] = string(raw)
	}
	if !slices.Equal(sorted(again), want) {
		t.Fatal("the second round trip changed items")
	}
}

// TestAnInterruptedImportResumesExactly: an import cancelled midway, in
// create mode, finishes its writes in flight and records exactly what it
// did; run again it writes exactly the rest, with no conflict on its own
// writes, and the counts of the two runs add up to the file.
func TestAnInterruptedImportResumesExactly(t *testing.T) {
	s := orrerytest.Start(t)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	lines := make([]string, 3000)
	for i := range lines {
		lines[i] = itemLine(r, i, 7)
	}
	in := filepath.Join(dir, "in.jsonl")
	writeLines(t, in, lines)
	c := newContainer(t, s, "db", "c", "/pk")
	state := filepath.Join(dir, "in.state")

	ctx, cancel := context.WithCancel(context.Background())
	var once atomic.Bool
	first, err := transfer.ImportFile(ctx, c, in, state, transfer.ImportOptions{Mode: transfer.Create, Concurrency: 4, Progress: func(p transfer.Progress) {
		if p.Written >= 1000 && once.CompareAndSwap(false, true) {
			cancel()
		}
	}})
	if err != context.Canceled {
		t.Fatalf("the interrupted import ended with %v, want context.Canceled", err)
	}
	if first.Written < 1000 || first.Written >= int64(len(lines)) || first.Failed != 0 || first.Unfinished == 0 {
		t.Fatalf("the interrupted import: %s", first)
	}
	second, err := transfer.ImportFile(context.Background(), c, in, state, transfer.ImportOptions{Mode: transfer.Create, Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	if second.Failed != 0 || second.Recovered != 0 || second.Earlier.Written != first.Written || first.Written+second.Written != int64(len(lines)) {
		t.Fatalf("first: %s\nsecond: %s", first, second)
	}
	checkHolds(t, c, lines)
}

// checkHolds fails unless the container holds exactly the items of lines.
func checkHolds(t testing.TB, c *azcosmos.ContainerClient, lines []string) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := transfer.Export(context.Background(), c, &buf, transfer.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) == 0 && buf.Len() == 0 {
		return
	}
	byID := map[string]string{}
	for _, l := range lines {
		byID[idOfLine(t, l)] = l
	}
	for _, g := range got {
		w, ok := byID[idOfLine(t, g)]
		if !ok || !jsonEqual(t, g, w) {
			t.Fatalf("the container holds %s, which the file does not", g)
		}
	}
	if len(got) != len(byID) {
		t.Fatalf("the container holds %d items, want the %d of the file", len(got), len(byID))
	}
}

// TestAnImportCutAtAnyPointResumesExactly: an import abandoned at random
// points with its writes in flight unanswered (as a killed process leaves
// them: made or not) resumes, in create mode, with no conflict on its own
// writes, finds those it made, and counts over its runs every record once.
func TestAnImportCutAtAnyPointResumesExactly(t *testing.T) {
	s := orrerytest.Start(t)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(7, 8))
	lines := make([]string, 4000)
	for i := range lines {
		lines[i] = itemLine(r, i, 5)
	}
	in := filepath.Join(dir, "in.jsonl")
	writeLines(t, in, lines)
	for round := range 4 {
		c := newContainer(t, s, "db", fmt.Sprintf("cut%d", round), "/pk")
		state := filepath.Join(dir, fmt.Sprintf("cut%d.state", round))
		var last *transfer.Summary
		for run := 0; ; run++ {
			ctx, cancel := context.WithCancel(context.Background())
			cutAt := int64(r.IntN(len(lines)))
			opts := transfer.ImportOptions{Mode: transfer.Create, Concurrency: 8, DrainTimeout: time.Nanosecond}
			if run < 3 {
				opts.Progress = func(p transfer.Progress) {
					if p.Records() >= cutAt {
						cancel()
					}
				}
			}
			sum, err := transfer.ImportFile(ctx, c, in, state, opts)
			cancel()
			if sum != nil {
				t.Logf("round %d run %d (cut at %d): %s", round, run, cutAt, sum)
			}
			if sum != nil && sum.Failed != 0 {
				t.Fatalf("round %d run %d: false failures: %s", round, run, sum)
			}
			if err == nil {
				last = sum
				break
			}
			if err != context.Canceled {
				t.Fatalf("round %d run %d: %v", round, run, err)
			}
		}
		total := last.Earlier.Written + last.Recovered + last.Written
		if total != int64(len(lines)) || last.Earlier.Failed != 0 || last.Earlier.Skipped != 0 {
			t.Fatalf("round %d: over the runs %d written (%s), want %d", round, total, last, len(lines))
		}
		checkHolds(t, c, lines)
	}
}

// TestExportResumesWhereItStopped: an export interrupted after its first
// page and run again with its state file yields the same file as one run.
func TestExportResumesWhereItStopped(t *testing.T) {
	s := orrerytest.Start(t)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(5, 6))
	lines := make([]string, 2500)
	for i := range lines {
		lines[i] = itemLine(r, i, 50)
	}
	in := filepath.Join(dir, "in.jsonl")
	writeLines(t, in, lines)
	c := newContainer(t, s, "db", "c", "/pk")
	importFile(t, c, in, transfer.ImportOptions{})
	var whole bytes.Buffer
	if _, err := transfer.Export(context.Background(), c, &whole, transfer.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(strings.TrimSpace(whole.String()), "\n")

	for _, format := range []transfer.Format{transfer.JSONLines, transfer.JSONArray} {
		out := filepath.Join(dir, "out."+string(format))
		state := out + ".state"
		ctx, cancel := context.WithCancel(context.Background())
		_, err := transfer.ExportFile(ctx, c, out, state, transfer.ExportOptions{Format: format, PageSize: 500, Progress: func(p transfer.Progress) {
			if p.Written >= 1000 {
				cancel()
			}
		}})
		if err == nil {
			t.Fatalf("%s: the interrupted export did not stop", format)
		}
		sum, err := transfer.ExportFile(context.Background(), c, out, state, transfer.ExportOptions{Format: format, PageSize: 500})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Earlier.Written != 1000 || sum.Written != int64(len(lines))-1000 {
			t.Fatalf("%s: resumed export: %s", format, sum)
		}
		var got []string
		if format == transfer.JSONLines {
			got = readLines(t, out)
		} else {
			b, _ := os.ReadFile(out)
			var arr []json.RawMessage
			if err := json.Unmarshal(b, &arr); err != nil {
				t.Fatalf("the resumed JSON array does not parse: %v", err)
			}
			for _, raw := range arr {
				got = append(got, string(raw))
			}
		}
		if !slices.Equal(sorted(got), sorted(lines)) {
			t.Fatalf("%s: the resumed export holds %d items, want %d exactly", format, len(got), len(lines))
		}
	}
}

// TestImportReportsEachFailureWithItsCause: records that cannot be written
// are counted by cause, written to the errors file with their number, and do
// not stop the others; an item without its partition key property is not a
// failure (the service files it under the undefined partition key).
func TestImportReportsEachFailureWithItsCause(t *testing.T) {
	s := orrerytest.Start(t)
	c := newContainer(t, s, "db", "c", "/pk")
	input := strings.Join([]string{
		`{"id":"ok1","pk":"a"}`,
		`{"id":"broken","pk":`,
		`{"id":"nopk"}`,
		`{"id":"ok2","pk":"b"}`,
		`{"id":"big","pk":"a","blob":"` + strings.Repeat("x", 3<<20) + `"}`,
		`{"id":"ok1","pk":"a"}`,
	}, "\n")
	var errs bytes.Buffer
	sum, err := transfer.Import(context.Background(), c, strings.NewReader(input), transfer.ImportOptions{Mode: transfer.Create, Errors: &errs, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Written != 3 || sum.Failed != 3 {
		t.Fatalf("summary: %s", sum)
	}
	causes := map[string]int64{}
	for _, g := range sum.Failures {
		causes[g.Cause] = g.Count
	}
	if causes["invalid"] != 1 || causes["duplicate"] != 1 || causes["413 RequestEntityTooLarge"] != 1 {
		t.Fatalf("failures by cause: %v", causes)
	}
	var records []int64
	for _, line := range strings.Split(strings.TrimSpace(errs.String()), "\n") {
		var e struct{ Record int64 }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		records = append(records, e.Record)
	}
	slices.Sort(records)
	if !slices.Equal(records, []int64{2, 5, 6}) {
		t.Fatalf("errors file names records %v", records)
	}
}

// TestSeedTwiceChangesNothing: a seed creates databases, containers (with
// their properties) and items; seeding again leaves everything, including
// items changed since, as it is.
func TestSeedTwiceChangesNothing(t *testing.T) {
	s := orrerytest.Start(t)
	seed := `{"databases":[{"id":"shop","containers":[
		{"id":"orders","partitionKey":{"paths":["/customerId"],"kind":"Hash"},"defaultTtl":3600,
		 "items":[{"id":"1","customerId":"alice","total":12.5},{"id":"2","customerId":"bob","total":3}]},
		{"id":"people","partitionKey":{"paths":["/tenant","/id"],"kind":"MultiHash","version":2},
		 "items":[{"id":"alice","tenant":"t1"}]}]}]}`
	ctx := context.Background()
	sum, err := transfer.Seed(ctx, s.Client, strings.NewReader(seed))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Written != 3 {
		t.Fatalf("first seed: %s", sum)
	}
	orders, _ := s.Client.NewContainer("shop", "orders")
	props, err := orders.Read(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ttl := props.ContainerProperties.DefaultTimeToLive; ttl == nil || *ttl != 3600 {
		t.Fatalf("defaultTtl %v, want 3600", ttl)
	}
	if _, err := orders.ReplaceItem(ctx, azcosmos.NewPartitionKeyString("alice"), "1", []byte(`{"id":"1","customerId":"alice","total":99}`), nil); err != nil {
		t.Fatal(err)
	}
	sum, err = transfer.Seed(ctx, s.Client, strings.NewReader(seed))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Written != 0 || sum.Skipped != 3 {
		t.Fatalf("second seed: %s", sum)
	}
	got, err := orders.ReadItem(ctx, azcosmos.NewPartitionKeyString("alice"), "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got.Value), `"total":99`) {
		t.Fatalf("the second seed overwrote a changed item: %s", got.Value)
	}
	people, _ := s.Client.NewContainer("shop", "people")
	if _, err := people.ReadItem(ctx, azcosmos.NewPartitionKey().AppendString("t1").AppendString("alice"), "alice", nil); err != nil {
		t.Fatalf("hierarchical partition key item: %v", err)
	}
}

// headerPolicy sends a fixed partition key header on every request: a
// reader of the undefined partition key, which the Go SDK cannot address.
type headerPolicy string

func (h headerPolicy) Do(req *policy.Request) (*http.Response, error) {
	req.Raw().Header.Set("x-ms-documentdb-partitionkey", string(h))
	return req.Next()
}

// TestItemsWithoutThePartitionKeyGoUnderTheUndefinedKey: an item that lacks
// its partition key property (or one path of a hierarchical key) is
// written, in a batch or alone, under the undefined partition key ({} in
// the header, as the other SDKs send it), where a read with that key finds
// it; a client without the policy counts such items as failed, saying why.
func TestItemsWithoutThePartitionKeyGoUnderTheUndefinedKey(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	single := newContainer(t, s, "db", "single", "/pk")
	input := `{"id":"a","pk":"x"}
{"id":"b"}
{"id":"c","other":1}
{"id":"d","pk":null}
{"id":"e","nested":{"pk":"not the path"}}`
	sum, err := transfer.Import(ctx, single, strings.NewReader(input), transfer.ImportOptions{Mode: transfer.Create})
	if err != nil || sum.Written != 5 || sum.Failed != 0 {
		t.Fatalf("import: %v %s", err, sum)
	}
	undefined, _ := policyClient(t, s, headerPolicy(`[{}]`)).NewContainer("db", "single")
	for _, id := range []string{"b", "c", "e"} {
		if _, err := undefined.ReadItem(ctx, azcosmos.NewPartitionKey(), id, nil); err != nil {
			t.Errorf("item %s is not under the undefined partition key: %v", id, err)
		}
	}
	if _, err := single.ReadItem(ctx, azcosmos.NullPartitionKey, "d", nil); err != nil {
		t.Errorf("an item whose key is null is not under null: %v", err)
	}
	// One alone (a large item) too.
	big := `{"id":"big","blob":"` + strings.Repeat("x", 600<<10) + `"}`
	if sum, err := transfer.Import(ctx, single, strings.NewReader(big), transfer.ImportOptions{}); err != nil || sum.Written != 1 {
		t.Fatalf("a large item without its key: %v %s", err, sum)
	}

	hier := newContainer(t, s, "db", "hier", "/tenant", "/user")
	if sum, err := transfer.Import(ctx, hier, strings.NewReader(`{"id":"1","tenant":"t1"}
{"id":"2","tenant":"t1"}
{"id":"3","user":"u"}`), transfer.ImportOptions{}); err != nil || sum.Written != 3 {
		t.Fatalf("hierarchical: %v %s", err, sum)
	}
	partial, _ := policyClient(t, s, headerPolicy(`["t1",{}]`)).NewContainer("db", "hier")
	if _, err := partial.ReadItem(ctx, azcosmos.NewPartitionKey(), "2", nil); err != nil {
		t.Errorf(`item 2 is not under ["t1",{}]: %v`, err)
	}

	bare := createContainer(t, s, "db", "bare", "/pk")
	sum, err = transfer.Import(ctx, bare, strings.NewReader(input), transfer.ImportOptions{})
	if err != nil || sum.Written != 2 || sum.Failed != 3 || len(sum.Failures) != 1 || sum.Failures[0].Cause != "undefined partition key" ||
		!strings.Contains(sum.Failures[0].Example, "PartitionKeyPolicy") {
		t.Fatalf("without the policy: %v %s", err, sum)
	}
}

// TestRepeatedIDsAreReportedAndHandledAsAsked: records repeating an id and
// partition key are counted and named; fail writes the first and fails the
// rest, first skips the rest, last leaves the last one, whatever the
// batches in flight; the same id in another partition is no repeat.
func TestRepeatedIDsAreReportedAndHandledAsAsked(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	var lines []string
	for i := range 999 {
		lines = append(lines, fmt.Sprintf(`{"id":"item-%d","pk":"p%d","v":%d}`, i, i%4, i))
	}
	// item-5 again (p1) twice, with new values; item-6 in another partition.
	lines = append(lines, `{"id":"item-5","pk":"p1","v":"second"}`, `{"id":"item-6","pk":"p3","v":"other partition"}`, `{"id":"item-5","pk":"p1","v":"third"}`)
	input := strings.Join(lines, "\n")
	v := func(c *azcosmos.ContainerClient) string {
		r, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString("p1"), "item-5", nil)
		if err != nil {
			t.Fatal(err)
		}
		var x struct{ V any }
		_ = json.Unmarshal(r.Value, &x)
		return fmt.Sprint(x.V)
	}
	for _, tc := range []struct {
		rule                    transfer.Duplicates
		written, skipped, fails int64
		value                   string
	}{
		{transfer.DuplicatesFail, 1000, 0, 2, "5"},
		{transfer.DuplicatesFirst, 1000, 2, 0, "5"},
		{transfer.DuplicatesLast, 1001, 1, 0, "third"},
	} {
		c := newContainer(t, s, "db", string(tc.rule), "/pk")
		var errs bytes.Buffer
		sum, err := transfer.Import(ctx, c, strings.NewReader(input), transfer.ImportOptions{Duplicates: tc.rule, Concurrency: 16, Errors: &errs})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Written != tc.written || sum.Skipped != tc.skipped || sum.Failed != tc.fails || sum.Duplicates != 2 {
			t.Errorf("%s: %s", tc.rule, sum)
		}
		if len(sum.DuplicateExamples) != 2 || sum.DuplicateExamples[0].ID != "item-5" || sum.DuplicateExamples[0].Records != [2]int64{6, 1000} ||
			!strings.Contains(sum.String(), `"item-5" ["p1"] (records 6 and 1000)`) {
			t.Errorf("%s: the repeats are not named: %+v\n%s", tc.rule, sum.DuplicateExamples, sum)
		}
		if got := v(c); got != tc.value {
			t.Errorf("%s: item-5 holds %s, want %s", tc.rule, got, tc.value)
		}
		if tc.rule == transfer.DuplicatesFail && !strings.Contains(errs.String(), `"cause":"duplicate"`) {
			t.Errorf("the errors file lacks the repeats:\n%s", errs.String())
		}
	}
	if _, err := transfer.Import(ctx, newContainer(t, s, "db", "x", "/pk"), strings.NewReader(input), transfer.ImportOptions{Mode: transfer.Create, Duplicates: transfer.DuplicatesLast}); err == nil {
		t.Error("keeping the last repeat in create mode was accepted")
	}
}

// TestAMissingContainerIsNamedAndExportLeavesNoFile: importing into or
// exporting from a container that does not exist is ErrContainerNotFound;
// the export creates no file, and an export that fails midway leaves none.
func TestAMissingContainerIsNamedAndExportLeavesNoFile(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	missing, _ := policyClient(t, s).NewContainer("nodb", "nothing")
	if _, err := transfer.Import(ctx, missing, strings.NewReader(`{"id":"a"}`), transfer.ImportOptions{}); !errors.Is(err, transfer.ErrContainerNotFound) {
		t.Fatalf("import into a missing container: %v", err)
	}
	dir := t.TempDir()
	for _, state := range []string{"", filepath.Join(dir, "out.state")} {
		out := filepath.Join(dir, "out.jsonl")
		if _, err := transfer.ExportFile(ctx, missing, out, state, transfer.ExportOptions{}); !errors.Is(err, transfer.ErrContainerNotFound) {
			t.Fatalf("export of a missing container: %v", err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Fatalf("a failed export left %v", entries)
		}
	}
	var buf bytes.Buffer
	if _, err := transfer.Export(ctx, missing, &buf, transfer.ExportOptions{}); !errors.Is(err, transfer.ErrContainerNotFound) || buf.Len() != 0 {
		t.Fatalf("export to a writer: %v, wrote %q", err, buf.String())
	}

	c := newContainer(t, s, "db", "c", "/pk")
	var lines []string
	for i := range 3000 {
		lines = append(lines, fmt.Sprintf(`{"id":"%d","pk":"p%d"}`, i, i%3))
	}
	importFile(t, c, writeTemp(t, lines), transfer.ImportOptions{})
	cctx, cancel := context.WithCancel(ctx)
	out := filepath.Join(dir, "cut.jsonl")
	_, err := transfer.ExportFile(cctx, c, out, "", transfer.ExportOptions{PageSize: 500, Progress: func(p transfer.Progress) {
		if p.Written >= 1000 {
			cancel()
		}
	}})
	if err == nil {
		t.Fatal("the cancelled export succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("an export cut short left %v", entries)
	}
}

func writeTemp(t testing.TB, lines []string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in.jsonl")
	writeLines(t, p, lines)
	return p
}

// TestInvalidJSONIsPlacedByLineAndColumn: a JSON Lines record that does not
// parse fails alone with the parser's reason, line and column; so does a
// malformed item of an array; an array whose own structure breaks stops
// the import there, saying where.
func TestInvalidJSONIsPlacedByLineAndColumn(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "c", "/pk")
	failures := func(input string) (*transfer.Summary, error, []string) {
		var errs bytes.Buffer
		sum, err := transfer.Import(ctx, c, strings.NewReader(input), transfer.ImportOptions{Errors: &errs, Concurrency: 1})
		var msgs []string
		for _, l := range strings.Split(strings.TrimSpace(errs.String()), "\n") {
			var e struct{ Message string }
			if json.Unmarshal([]byte(l), &e) == nil {
				msgs = append(msgs, e.Message)
			}
		}
		return sum, err, msgs
	}
	sum, err, msgs := failures("{\"id\":\"a\",\"pk\":\"x\"}\n\n  {\"id\":\"b\",\"pk\":}\n{\"id\":\"été\", \"pk\":\"x\",}\n[1]\n{\"id\":\"c\",\n\"pk\":\"x\"}\n{\"id\":\"d\",\"pk\":\"x\"}")
	want := []string{
		"line 3, column 18: invalid character '}' looking for beginning of value",
		"line 4, column 23: invalid character '}' looking for beginning of object key string",
		"line 5, column 1: an item must be a JSON object, not an array",
		"line 6, column 11: unexpected end of JSON input (JSON Lines hold each item whole on one line)",
		"line 7, column 5: invalid character ':' after top-level value",
	}
	if err != nil || sum.Written != 2 || !slices.Equal(msgs, want) {
		t.Fatalf("JSON Lines: %v %s\n%q\nwant\n%q", err, sum, msgs, want)
	}

	sum, err, msgs = failures("[\n  {\"id\": \"e\", \"pk\": \"x\"},\n  {\"id\": \"f\",\n   \"pk\": tru},\n  \"text\",\n  {\"id\": \"g\", \"pk\": \"x\"}\n]\n")
	want = []string{
		"line 4, column 13: invalid character '}' in literal true (expecting 'e')",
		"line 5, column 3: an item must be a JSON object, not a string",
	}
	if err != nil || sum.Written != 2 || !slices.Equal(msgs, want) {
		t.Fatalf("array: %v %s\n%q\nwant\n%q", err, sum, msgs, want)
	}

	for input, where := range map[string]string{
		"[{\"id\":\"h\",\"pk\":\"x\"}\n {\"id\":\"i\"}]":                    "line 2, column 2: expected , or ] after item 1 of the array, found '{'",
		"[{\"id\":\"h\",\"pk\":\"x\"},\n {\"id\":\"i\",\"a\":[1}]":          `line 2, column 18: invalid character '}' after array element`,
		"[{\"id\":\"h\",\"pk\":\"x\"},\n {\"id\":\"i\",\"a\":\"open}]\n]\n": "line 2, column 16: the string starting here is not closed on its line",
		"[{\"id\":\"h\",\"pk\":\"x\"},\n {\"id\":\"i\",\"a\":\"open}]":      "line 2, column 16: unexpected end of input: the string starting here is not closed",
		"[{\"id\":\"h\",\"pk\":\"x\"},\n {\"id\":\"i\",\"pk\":\"x\"}":       "line 2, column 21: unexpected end of input: the array opened at line 1, column 1 is not closed",
		"[{\"id\":\"h\",\"pk\":\"x\"}] x":                                   "line 1, column 23: unexpected 'x' after the end of the array",
	} {
		sum, err, _ := failures(input)
		var ie *transfer.InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), where) || sum.Written < 1 {
			t.Errorf("%q: %v (%s), want %s", input, err, sum, where)
		}
	}
}

// TestAResumeRefusesAnotherFileOrContainer: a state file resumes only the
// file it was written for, unchanged, into the container it was written for.
func TestAResumeRefusesAnotherFileOrContainer(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	writeLines(t, in, []string{`{"id":"a","pk":"x"}`, `{"id":"b","pk":"x"}`})
	state := filepath.Join(dir, "in.state")
	c := newContainer(t, s, "db", "c", "/pk")
	if _, err := transfer.ImportFile(ctx, c, in, state, transfer.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if sum, err := transfer.ImportFile(ctx, c, in, state, transfer.ImportOptions{}); err != nil || sum.Written != 0 || sum.Earlier.Written != 2 {
		t.Fatalf("a finished import resumed: %v %s", err, sum)
	}
	if _, err := os.Stat(state); err != nil {
		t.Fatalf("no state file: %v", err)
	}
	other := newContainer(t, s, "db", "other", "/pk")
	if _, err := transfer.ImportFile(ctx, other, in, state, transfer.ImportOptions{}); err == nil || !strings.Contains(err.Error(), "another container") {
		t.Errorf("resuming into another container: %v", err)
	}
	writeLines(t, in, []string{`{"id":"a","pk":"x"}`, `{"id":"B","pk":"x"}`})
	if _, err := transfer.ImportFile(ctx, c, in, state, transfer.ImportOptions{}); err == nil || !strings.Contains(err.Error(), "changed") {
		t.Errorf("resuming a changed file: %v", err)
	}
}

// failAfter fails every request after the first n with a lost connection.
type failAfter struct{ n, seen *atomic.Int64 }

func (f failAfter) Do(req *policy.Request) (*http.Response, error) {
	if f.seen.Add(1) > f.n.Load() {
		return nil, errors.New("connection reset by peer (test)")
	}
	return req.Next()
}

// TestAnImportStopsWhenTheEndpointFailsAndResumesExactly: a lost
// connection stops the import (ErrStopped) rather than failing every record
// after it; the state records exactly what was written, and the import
// resumed once the endpoint is back writes the rest.
func TestAnImportStopsWhenTheEndpointFailsAndResumesExactly(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	createContainer(t, s, "db", "c", "/pk")
	var n, seen atomic.Int64
	n.Store(15)
	c, _ := policyClient(t, s, failAfter{&n, &seen}).NewContainer("db", "c")
	var lines []string
	for i := range 5000 {
		lines = append(lines, fmt.Sprintf(`{"id":"%d","pk":"p%d"}`, i, i%50))
	}
	in := writeTemp(t, lines)
	state := in + ".state"
	first, err := transfer.ImportFile(ctx, c, in, state, transfer.ImportOptions{Mode: transfer.Create, Concurrency: 4})
	if !errors.Is(err, transfer.ErrStopped) || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("import over a failing connection: %v", err)
	}
	if first.Failed != 0 || first.Written == 0 || first.Unfinished == 0 {
		t.Fatalf("first: %s", first)
	}
	n.Store(1 << 40)
	second, err := transfer.ImportFile(ctx, c, in, state, transfer.ImportOptions{Mode: transfer.Create})
	if err != nil || second.Failed != 0 || first.Written+second.Written+second.Recovered != int64(len(lines)) {
		t.Fatalf("resumed: %v\nfirst: %s\nsecond: %s", err, first, second)
	}
	checkHolds(t, c, lines)
}

// TestASeedFileIsCheckedWholeBeforeAnythingIsCreated: a misspelt key is
// named with the keys allowed there, bad JSON and wrong types are placed by
// line and column, repeated ids are named; a refused file creates nothing.
func TestASeedFileIsCheckedWholeBeforeAnythingIsCreated(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	client := policyClient(t, s)
	for _, tc := range []struct{ seed, want string }{
		{`{"databses": []}`, `line 1, column 2: the seed file has an unknown key "databses"; the keys it takes are databases`},
		{"{\"databases\": [{\"id\": \"shop\",\n  \"colections\": []}]}",
			`line 2, column 3: databases[0] has an unknown key "colections"; the keys it takes are containers, id, throughput`},
		{"{\"databases\": [{\"id\": \"shop\", \"containers\": [\n {\"id\": \"orders\", \"partitonKey\": {\"paths\": [\"/pk\"]}}]}]}",
			`line 2, column 19: databases[0] ("shop").containers[0] has an unknown key "partitonKey"; the keys it takes are analyticalStorageTtl, conflictResolutionPolicy, defaultTtl, fullTextPolicy, id, indexingPolicy, items, partitionKey, throughput, uniqueKeyPolicy, vectorEmbeddingPolicy`},
		{"{\"databases\": [{\"id\": \"shop\", \"containers\": [\n {\"id\": \"orders\", \"partitionKey\": {\"path\": [\"/pk\"]}}]}]}",
			`line 2, column 36: databases[0] ("shop").containers[0] ("orders").partitionKey has an unknown key "path"; the keys it takes are kind, paths, version`},
		{"{\"databases\": [{\"id\": \"shop\", \"containers\": [\n {\"id\": \"orders\", \"partitionKey\": {\"paths\": [\"/pk\"]},\n  \"indexingPolicy\": {\"includedPaths\": [{\"paht\": \"/*\"}]}}]}]}",
			`line 3, column 41: databases[0] ("shop").containers[0] ("orders").indexingPolicy.includedPaths[0] has an unknown key "paht"; the keys it takes are path`},
		{"{\"databases\": [{\"id\": \"shop\", \"containers\": [\n {\"id\": \"orders\", \"partitionKey\": {\"paths\": [\"/pk\"]}, \"defaultTtl\": \"3600\"}]}]}",
			`line 2, column 69: databases[0] ("shop").containers[0] ("orders").defaultTtl must be a whole number, not a string`},
		{"{\"databases\": [{\"id\": \"shop\", \"throughput\": 1e12}]}",
			`line 1, column 45: databases[0] ("shop").throughput must be a whole number from -2147483648 to 2147483647, not 1e12`},
		{"{\"databases\": [{\"id\": \"shop\",\n \"id\": \"again\"}]}", `line 2, column 2: databases[0] has the key "id" twice`},
		{"{\"databases\": [{\"id\": \"shop\", \"containers\": [\n {\"id\": \"orders\" \"partitionKey\": {}}]}]}", `line 2, column 18: invalid character '"' after object key:value pair`},
		{"{\"databases\": [{\"id\": \"shop\"}]", `line 1, column 31: unexpected end of input`},
		{"{\"databases\": [{\"id\": \"shop\"}]} []", `line 1, column 34: unexpected content after the seed's object`},
		{"{\"databases\": [{\"id\": \"shop\"}, {\"id\": \"shop\"}]}", `the database "shop" appears twice`},
		{"{\"databases\": [{\"id\": \"shop\", \"containers\": [{\"id\": \"orders\"}]}]}", `container shop/orders has no partitionKey`},
		{"{\"databases\": [{\"id\": \"shop\", \"containers\": [{\"id\": \"orders\", \"partitionKey\": {\"paths\": [\"/pk\"]}, \"items\": [\n" +
			" {\"id\": \"1\", \"pk\": \"a\"},\n {\"id\": \"1\", \"pk\": \"b\"},\n {\"id\": \"2\"},\n {\"id\": \"1\", \"pk\": \"a\", \"v\": 2},\n {\"id\": \"2\", \"other\": 1}]}]}]}",
			"container shop/orders has items with the same id and partition key, which it can hold only one of:\n" +
				"  id \"1\", partition key [\"a\"]: items[0] (line 2) and items[3] (line 5)\n  id \"2\", partition key [{}]: items[2] (line 4) and items[4] (line 6)"},
		{"{\"databases\": [{\"id\": \"shop\", \"containers\": [{\"id\": \"orders\", \"partitionKey\": {\"paths\": [\"/pk\"]}, \"items\": [\n {\"pk\": \"a\"}]}]}]}",
			`line 2, column 2: container shop/orders: items[0]: the item has no "id"`},
		{"{\"databases\": [{\"id\": \"shop\", \"containers\": [{\"id\": \"orders\", \"partitionKey\": {\"paths\": [\"/pk\"]}, \"items\": [\n 7]}]}]}",
			`line 2, column 2: container shop/orders: items[0] must be an object, not a number`},
	} {
		_, err := transfer.Seed(ctx, client, strings.NewReader(tc.seed))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("seed %s:\n got %v\nwant %s", tc.seed, err, tc.want)
		}
	}
	pager := s.Client.NewQueryDatabasesPager("SELECT * FROM d", nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Databases) != 0 {
			t.Fatalf("a refused seed created %d databases", len(page.Databases))
		}
	}

	// Accepted: the same id in two partitions, and items without the key.
	good := `{"databases": [{"id": "shop", "containers": [{"id": "orders", "partitionKey": {"paths": ["/pk"]}, "items": [
		{"id": "1", "pk": "a"}, {"id": "1", "pk": "b"}, {"id": "2"}, {"id": "3"}]}]}]}`
	sum, err := transfer.Seed(ctx, client, strings.NewReader(good))
	if err != nil || sum.Written != 4 {
		t.Fatalf("seed: %v %s", err, sum)
	}
	undefined, _ := policyClient(t, s, headerPolicy(`[{}]`)).NewContainer("shop", "orders")
	if _, err := undefined.ReadItem(ctx, azcosmos.NewPartitionKey(), "3", nil); err != nil {
		t.Fatalf("a seeded item without its key: %v", err)
	}
}

// TestAResumedCreateStillFailsOnItemsThatExistedBefore: an item that was in
// the container before the import began, with a record's very content, is
// a conflict for that record even when the record is one an interrupted run
// may have written: it is older than the import.
func TestAResumedCreateStillFailsOnItemsThatExistedBefore(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	c := newContainer(t, s, "db", "c", "/pk")
	lines := []string{`{"id":"old","pk":"x","v":1}`}
	for i := range 300 {
		lines = append(lines, fmt.Sprintf(`{"id":"%d","pk":"x"}`, i))
	}
	if _, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString("x"), []byte(lines[0]), nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // _ts counts seconds
	in := writeTemp(t, lines)
	state := in + ".state"
	// Cut at once, the writes in flight abandoned: every record may have
	// been written.
	cctx, cancel := context.WithCancel(ctx)
	_, err := transfer.ImportFile(cctx, c, in, state, transfer.ImportOptions{Mode: transfer.Create, DrainTimeout: time.Nanosecond,
		Progress: func(transfer.Progress) { cancel() }})
	if err != context.Canceled {
		t.Fatalf("the cut import: %v", err)
	}
	sum, err := transfer.ImportFile(ctx, c, in, state, transfer.ImportOptions{Mode: transfer.Create})
	// The cut run may have failed the record itself before it stopped.
	if err != nil || sum.Earlier.Failed+sum.Failed != 1 || sum.Failed == 1 && (sum.Failures[0].Cause != "409 Conflict" || sum.Failures[0].ExampleRecord != 1) ||
		sum.Earlier.Written+sum.Recovered+sum.Written != 300 {
		t.Fatalf("resumed: %v %s", err, sum)
	}
}

// TestAResumedImportKeepsTheLastOfRepeatedIDs: with DuplicatesLast, an
// import cut at random points and resumed ends with the last record of
// every repeated id, never an earlier one written again.
func TestAResumedImportKeepsTheLastOfRepeatedIDs(t *testing.T) {
	s := orrerytest.Start(t)
	r := rand.New(rand.NewPCG(9, 10))
	var lines []string
	last := map[string]string{}
	for i := range 3000 {
		id := fmt.Sprintf("item-%d", r.IntN(1500)) // about half repeat
		line := fmt.Sprintf(`{"id":%q,"pk":"p%d","v":%d}`, id, len(id)%3, i)
		lines = append(lines, line)
		last[id] = line
	}
	in := writeTemp(t, lines)
	for round := range 3 {
		c := newContainer(t, s, "db", fmt.Sprintf("last%d", round), "/pk")
		state := fmt.Sprintf("%s.%d.state", in, round)
		for run := 0; ; run++ {
			ctx, cancel := context.WithCancel(context.Background())
			cutAt := int64(r.IntN(len(lines)))
			opts := transfer.ImportOptions{Duplicates: transfer.DuplicatesLast, Concurrency: 8, DrainTimeout: time.Nanosecond}
			if run < 3 {
				opts.Progress = func(p transfer.Progress) {
					if p.Records() >= cutAt {
						cancel()
					}
				}
			}
			sum, err := transfer.ImportFile(ctx, c, in, state, opts)
			cancel()
			if err == nil {
				if sum.Failed != 0 {
					t.Fatalf("round %d: %s", round, sum)
				}
				break
			}
			if err != context.Canceled {
				t.Fatal(err)
			}
		}
		var want []string
		for _, l := range last {
			want = append(want, l)
		}
		checkHolds(t, c, want)
	}
}

// TestImportRefusesWhatParsersReadDifferently: records holding a number
// beyond a double or a property named twice are each reported as a 400 with
// their record number, and the import goes on with the rest, instead of
// stopping at a 500 or storing a document each client reads its own way.
func TestImportRefusesWhatParsersReadDifferently(t *testing.T) {
	s := orrerytest.Start(t)
	c := newContainer(t, s, "db", "c", "/pk")
	input := strings.Join([]string{
		`{"id":"ok1","pk":"a"}`,
		`{"id":"inf","pk":"a","v":1e400}`,
		`{"id":"neg","pk":"a","v":{"w":[-1e400]}}`,
		`{"id":"digits","pk":"a","v":` + strings.Repeat("9", 400) + `}`,
		`{"id":"d1","id":"d2","pk":"a"}`,
		`{"id":"ok2","pk":"b","tiny":1e-400}`,
	}, "\n")
	var errs bytes.Buffer
	sum, err := transfer.Import(context.Background(), c, strings.NewReader(input), transfer.ImportOptions{Mode: transfer.Upsert, Errors: &errs, Concurrency: 1})
	if err != nil {
		t.Fatalf("import: %v (errors: %s)", err, errs.String())
	}
	if sum.Written != 2 || sum.Failed != 4 {
		t.Fatalf("summary: %s (errors: %s)", sum, errs.String())
	}
	for _, g := range sum.Failures {
		if g.Cause != "400 BadRequest" {
			t.Errorf("failures by cause: %q %d, want every failure a 400 BadRequest", g.Cause, g.Count)
		}
	}
	var records []int64
	for _, line := range strings.Split(strings.TrimSpace(errs.String()), "\n") {
		var e struct{ Record int64 }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		records = append(records, e.Record)
	}
	slices.Sort(records)
	if !slices.Equal(records, []int64{2, 3, 4, 5}) {
		t.Fatalf("errors file names records %v: %s", records, errs.String())
	}
}
