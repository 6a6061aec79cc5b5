package transfer_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/transfer"
)

func newContainer(t testing.TB, s *orrerytest.Server, db, name string, paths ...string) *azcosmos.ContainerClient {
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

// TestImportResumesWhereItStopped: an import cancelled midway and run again
// with its state file writes every item once more at most and ends with all
// of them, none failed.
func TestImportResumesWhereItStopped(t *testing.T) {
	s := orrerytest.Start(t)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	lines := make([]string, 3000)
	for i := range lines {
		lines[i] = itemLine(r, i, 3)
	}
	in := filepath.Join(dir, "in.jsonl")
	writeLines(t, in, lines)
	c := newContainer(t, s, "db", "c", "/pk")
	state := filepath.Join(dir, "in.state")

	ctx, cancel := context.WithCancel(context.Background())
	var seen atomic.Int64
	f, _ := os.Open(in)
	first, err := transfer.Import(ctx, c, f, transfer.ImportOptions{StateFile: state, Concurrency: 2, Progress: func(p transfer.Progress) {
		if p.Written >= 1000 && seen.Add(1) == 1 {
			cancel()
		}
	}})
	f.Close()
	if err != context.Canceled {
		t.Fatalf("the interrupted import ended with %v, want context.Canceled", err)
	}
	if first.Written < 1000 || first.Written >= int64(len(lines)) {
		t.Fatalf("the interrupted import wrote %d items", first.Written)
	}
	second := importFile(t, c, in, transfer.ImportOptions{StateFile: state, Concurrency: 8})
	if second.Failed != 0 || second.Skipped == 0 {
		t.Fatalf("resumed import: %s", second)
	}
	// Records resumed from the watermark may be written twice (upsert), never skipped.
	if first.Written+second.Written < int64(len(lines)) || second.Skipped > first.Written {
		t.Fatalf("first %s; second %s", first, second)
	}
	var buf bytes.Buffer
	if _, err := transfer.Export(context.Background(), c, &buf, transfer.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	ids := make([]string, len(got))
	for i, g := range got {
		ids[i] = idOfLine(t, g)
	}
	wantIDs := make([]string, len(lines))
	for i, l := range lines {
		wantIDs[i] = idOfLine(t, l)
	}
	if !slices.Equal(sorted(ids), sorted(wantIDs)) {
		t.Fatalf("after resuming the container holds %d items, want the %d of the file", len(got), len(lines))
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
		if sum.Skipped != 1000 || sum.Written != int64(len(lines))-1000 {
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
// not stop the others.
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
	if sum.Written != 2 || sum.Failed != 4 {
		t.Fatalf("summary: %s", sum)
	}
	causes := map[string]int64{}
	for _, g := range sum.Failures {
		causes[g.Cause] = g.Count
	}
	if causes["invalid"] != 2 || causes["409 Conflict"] != 1 || causes["413 RequestEntityTooLarge"] != 1 {
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
	if !slices.Equal(records, []int64{2, 3, 5, 6}) {
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
	if _, err := transfer.Seed(ctx, s.Client, strings.NewReader(`{"databases":[{"id":"x","colections":[]}]}`)); err == nil {
		t.Fatal("a misspelt seed file was accepted")
	}
}
