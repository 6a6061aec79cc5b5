package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// Mode says how an import writes each item.
type Mode string

const (
	// Upsert creates or replaces each item: an import run twice, or resumed,
	// leaves the same items.
	Upsert Mode = "upsert"
	// Create creates each item and counts an existing id as a failure (409).
	Create Mode = "create"
	// CreateIfAbsent creates each item and leaves an existing one as it is,
	// counting it as skipped: what a seed does.
	CreateIfAbsent Mode = "create-if-absent"
)

// ImportOptions configure Import.
type ImportOptions struct {
	// Mode is how items are written; Upsert when empty.
	Mode Mode
	// Concurrency is the number of writes in flight; 16 when zero.
	Concurrency int
	// StateFile, when set, makes the import resumable: it records how many
	// records (in file order) are done, and a later import with the same
	// file and state file starts after them.
	StateFile string
	// Errors, when set, receives one JSON line per failed record: its
	// number (from 1), status, message and the record itself.
	Errors io.Writer
	// Progress, when set, is called after every record with the counts so
	// far and the bytes of input read.
	Progress func(Progress)
}

// Progress is a running count.
type Progress struct {
	Written, Skipped, Failed int64
	BytesRead                int64
}

// Summary is what an import or export did.
type Summary struct {
	// Written items (imported, or exported).
	Written int64
	// Skipped: records before the resume point, and, with CreateIfAbsent,
	// items that already existed.
	Skipped int64
	// Failed records, grouped by cause in Failures.
	Failed   int64
	Failures []FailureGroup
	Elapsed  time.Duration
}

// FailureGroup counts the records that failed for one cause.
type FailureGroup struct {
	// Cause is the status and error code ("409 Conflict") or "invalid" for a
	// record that could not be sent.
	Cause string
	Count int64
	// Example is the first failure's message and record number (from 1).
	Example       string
	ExampleRecord int64
}

// String formats the summary for people.
func (s *Summary) String() string {
	msg := fmt.Sprintf("%d written, %d skipped, %d failed in %s", s.Written, s.Skipped, s.Failed, s.Elapsed.Round(time.Millisecond))
	if secs := s.Elapsed.Seconds(); secs > 0 && s.Written > 0 {
		msg += fmt.Sprintf(" (%.0f items/s)", float64(s.Written)/secs)
	}
	for _, g := range s.Failures {
		msg += fmt.Sprintf("\n  %d × %s, e.g. record %d: %s", g.Count, g.Cause, g.ExampleRecord, g.Example)
	}
	return msg
}

// importState is the resumable import's state file.
type importState struct {
	// Done is the number of records, from the first, all written (or failed
	// for good): a resumed import starts at this record.
	Done int64 `json:"done"`
}

// Import writes every record of r (a JSON array of items or JSON Lines) into
// the container. It returns when the input is exhausted or ctx ends; then the
// state file (if any) says where to resume.
func Import(ctx context.Context, c *azcosmos.ContainerClient, r io.Reader, opts ImportOptions) (*Summary, error) {
	start := time.Now()
	if opts.Mode == "" {
		opts.Mode = Upsert
	}
	switch opts.Mode {
	case Upsert, Create, CreateIfAbsent:
	default:
		return nil, fmt.Errorf("unknown import mode %q (upsert, create or create-if-absent)", opts.Mode)
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 16
	}
	props, err := c.Read(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("reading the container: %w", err)
	}
	def := props.ContainerProperties.PartitionKeyDefinition
	var resumeAt int64
	if opts.StateFile != "" {
		st, err := readState[importState](opts.StateFile)
		if err != nil {
			return nil, err
		}
		resumeAt = st.Done
	}

	in := &countingReader{r: r}
	recs := make(chan record, 1024)
	stop := make(chan struct{})
	readErr := make(chan error, 1)
	go func() {
		readErr <- readRecords(in, recs, stop)
		close(recs)
	}()

	im := &importer{c: c, def: def, opts: opts, in: in, failures: map[string]*FailureGroup{}, done: resumeAt, pending: map[int64]bool{}, abandoned: -1}
	groups := map[string]*group{}
	buffered := 0
	var wg sync.WaitGroup
	sem := make(chan struct{}, opts.Concurrency)
	// dispatch sends one group's records on their way; false when ctx ended.
	dispatch := func(key string) bool {
		g := groups[key]
		delete(groups, key)
		buffered -= len(g.recs)
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return false
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			im.writeGroup(ctx, g)
		}()
		return true
	}
	stopped := false
	var lastSave time.Time
	for rec := range recs {
		if rec.n < resumeAt {
			im.skipped.Add(1)
			continue
		}
		im.begin(rec.n)
		var pk azcosmos.PartitionKey
		var key string
		if rec.err == nil {
			pk, key, rec.err = partitionKeyOf(def, rec.item)
		}
		if rec.err != nil {
			im.fail(rec, "invalid", rec.err.Error())
			im.finish(rec.n)
			continue
		}
		if len(rec.item) > maxBatchBytes/2 {
			// A large item goes alone: it would crowd a batch out.
			key = "\x00alone"
		}
		g := groups[key]
		if g == nil {
			g = &group{pk: pk}
			groups[key] = g
		}
		g.recs = append(g.recs, rec)
		g.bytes += len(rec.item)
		buffered++
		if len(g.recs) >= maxBatchOps || g.bytes >= maxBatchBytes || key == "\x00alone" {
			if !dispatch(key) {
				stopped = true
				break
			}
		}
		if buffered >= maxBuffered {
			for k := range groups {
				if !dispatch(k) {
					stopped = true
					break
				}
			}
		}
		if stopped {
			break
		}
		if opts.StateFile != "" && time.Since(lastSave) > 500*time.Millisecond {
			lastSave = time.Now()
			if err := writeState(opts.StateFile, importState{Done: im.watermark()}); err != nil {
				return nil, err
			}
		}
	}
	if !stopped {
		for k := range groups {
			if !dispatch(k) {
				break
			}
		}
	}
	close(stop)
	for range recs {
	}
	wg.Wait()
	rerr := <-readErr
	if opts.StateFile != "" {
		if err := writeState(opts.StateFile, importState{Done: im.watermark()}); err != nil {
			return nil, err
		}
	}
	sum := im.summary(time.Since(start))
	if ctx.Err() != nil {
		return sum, ctx.Err()
	}
	if rerr != nil {
		return sum, fmt.Errorf("reading the input: %w", rerr)
	}
	return sum, nil
}

// Batches of one logical partition's records go in one transactional batch
// within the service's limits (100 operations, 2 MB); at most maxBuffered
// records wait for their batch to fill.
const (
	maxBatchOps   = 100
	maxBatchBytes = 1 << 20
	maxBuffered   = 5000
)

// group is the records of one logical partition waiting to be written.
type group struct {
	pk    azcosmos.PartitionKey
	recs  []record
	bytes int
}

func (c *countingReader) bytesRead() int64 { return atomic.LoadInt64(&c.n) }

// importer holds an import's shared counts.
type importer struct {
	c    *azcosmos.ContainerClient
	def  azcosmos.PartitionKeyDefinition
	opts ImportOptions
	in   *countingReader

	written, skipped, failed atomic.Int64

	mu       sync.Mutex
	failures map[string]*FailureGroup
	// done is the watermark: every record below it is finished; pending
	// holds the records begun and not finished.
	done    int64
	pending map[int64]bool
	// abandoned is the lowest record cut short by the caller, or -1.
	abandoned int64
	errMu     sync.Mutex
}

func (im *importer) begin(n int64) {
	im.mu.Lock()
	im.pending[n] = true
	im.mu.Unlock()
}

// finish marks record n done, unless it was abandoned.
func (im *importer) finish(n int64) {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.abandoned >= 0 && n >= im.abandoned {
		return
	}
	delete(im.pending, n)
	if n+1 > im.done {
		im.done = n + 1
	}
}

// abandon marks record n as not written: the resume point stays at or
// below it.
func (im *importer) abandon(n int64) {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.abandoned < 0 || n < im.abandoned {
		im.abandoned = n
	}
}

// watermark is the number of the lowest record not finished: the resume
// point.
func (im *importer) watermark() int64 {
	im.mu.Lock()
	defer im.mu.Unlock()
	low := int64(-1)
	for n := range im.pending {
		if low < 0 || n < low {
			low = n
		}
	}
	if low < 0 {
		// Nothing in flight: everything begun so far is done.
		return im.done
	}
	return low
}

// writeGroup writes a group's records as one transactional batch; when the
// batch fails (one record refused fails them all) each record is written
// alone, so that every refusal is counted with its own cause.
func (im *importer) writeGroup(ctx context.Context, g *group) {
	if len(g.recs) > 1 {
		b := im.c.NewTransactionalBatch(g.pk)
		for _, rec := range g.recs {
			if im.opts.Mode == Upsert {
				b.UpsertItem(rec.item, nil)
			} else {
				b.CreateItem(rec.item, nil)
			}
		}
		resp, err := im.c.ExecuteTransactionalBatch(ctx, b, nil)
		if err == nil && resp.Success {
			for _, rec := range g.recs {
				im.written.Add(1)
				im.finish(rec.n)
			}
			im.progress()
			return
		}
		if ctx.Err() != nil {
			for _, rec := range g.recs {
				im.abandon(rec.n)
			}
			return
		}
	}
	for _, rec := range g.recs {
		im.write(ctx, g.pk, rec)
	}
}

// write writes one record alone.
func (im *importer) write(ctx context.Context, pk azcosmos.PartitionKey, rec record) {
	defer im.finish(rec.n)
	defer im.progress()
	var err error
	opts := &azcosmos.ItemOptions{EnableContentResponseOnWrite: false}
	switch im.opts.Mode {
	case Upsert:
		_, err = im.c.UpsertItem(ctx, pk, rec.item, opts)
	default:
		_, err = im.c.CreateItem(ctx, pk, rec.item, opts)
	}
	var re *azcore.ResponseError
	switch {
	case err == nil:
		im.written.Add(1)
	case im.opts.Mode == CreateIfAbsent && errors.As(err, &re) && re.StatusCode == 409:
		im.skipped.Add(1)
	case ctx.Err() != nil:
		// Cut short by the caller, not refused: the record stays unfinished
		// so that the state file resumes at or before it.
		im.abandon(rec.n)
	case errors.As(err, &re):
		cause, msg := responseCause(re)
		im.fail(rec, cause, msg)
	default:
		im.fail(rec, "error", err.Error())
	}
}

func (im *importer) progress() {
	if im.opts.Progress != nil {
		im.opts.Progress(Progress{Written: im.written.Load(), Skipped: im.skipped.Load(), Failed: im.failed.Load(), BytesRead: im.in.bytesRead()})
	}
}

// responseCause is the status and the service's error code of an error
// response ("409 Conflict"), and its message.
func responseCause(re *azcore.ResponseError) (cause, msg string) {
	var body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if re.RawResponse != nil && re.RawResponse.Body != nil {
		if b, err := io.ReadAll(io.LimitReader(re.RawResponse.Body, 64<<10)); err == nil {
			_ = json.Unmarshal(b, &body)
		}
	}
	if body.Code == "" {
		body.Code = strings.TrimSpace(strings.TrimPrefix(re.ErrorCode, strconv.Itoa(re.StatusCode)))
	}
	if body.Message == "" {
		body.Message = re.ErrorCode
	}
	// The service appends the activity id and its own name on new lines.
	msg, _, _ = strings.Cut(body.Message, "\r\n")
	msg, _, _ = strings.Cut(msg, "\n")
	return fmt.Sprintf("%d %s", re.StatusCode, body.Code), msg
}

func (im *importer) fail(rec record, cause, msg string) {
	im.failed.Add(1)
	im.mu.Lock()
	g := im.failures[cause]
	if g == nil {
		g = &FailureGroup{Cause: cause, Example: msg, ExampleRecord: rec.n + 1}
		im.failures[cause] = g
	}
	g.Count++
	im.mu.Unlock()
	if im.opts.Errors != nil {
		line, _ := json.Marshal(struct {
			Record  int64  `json:"record"`
			Cause   string `json:"cause"`
			Message string `json:"message"`
			Item    string `json:"item"`
		}{rec.n + 1, cause, msg, string(rec.item)})
		im.errMu.Lock()
		_, _ = im.opts.Errors.Write(append(line, '\n'))
		im.errMu.Unlock()
	}
}

func (im *importer) summary(elapsed time.Duration) *Summary {
	s := &Summary{Written: im.written.Load(), Skipped: im.skipped.Load(), Failed: im.failed.Load(), Elapsed: elapsed}
	for _, g := range im.failures {
		s.Failures = append(s.Failures, *g)
	}
	sort.Slice(s.Failures, func(i, j int) bool { return s.Failures[i].Count > s.Failures[j].Count })
	return s
}

// readState reads a state file; a missing one is the zero state.
func readState[T any](path string) (T, error) {
	var st T
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("state file %s: %w", path, err)
	}
	return st, nil
}

// writeState replaces a state file atomically.
func writeState(path string, st any) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
