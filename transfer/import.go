package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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

// Duplicates says what an import does with a record whose id and partition
// key an earlier record of the input already has: the container can hold
// only one of them.
type Duplicates string

const (
	// DuplicatesFail writes the first and counts each repeat as a failure.
	DuplicatesFail Duplicates = "fail"
	// DuplicatesFirst writes the first and skips the repeats.
	DuplicatesFirst Duplicates = "first"
	// DuplicatesLast writes the last (Upsert only): the repeats wait until
	// the rest of the input is written, so the last one is what stays.
	DuplicatesLast Duplicates = "last"
)

// ImportOptions configure Import and ImportFile.
type ImportOptions struct {
	// Mode is how items are written; Upsert when empty.
	Mode Mode
	// Duplicates is what to do with repeated ids; DuplicatesFail when
	// empty. Telling repeats apart costs about 30 bytes of memory per
	// record of the input.
	Duplicates Duplicates
	// Concurrency is the number of writes in flight; 16 when zero.
	Concurrency int
	// Errors, when set, receives one JSON line per failed record: its
	// number (from 1) and line, cause, message and the record itself.
	Errors io.Writer
	// Progress, when set, is called as records are done.
	Progress func(Progress)
	// DrainTimeout is how long the writes in flight when the import stops
	// (ctx ends, or the endpoint fails) have to be answered before they are
	// abandoned; 30 s when zero. A write abandoned is not recorded as done,
	// and a resumed import checks whether it was made.
	DrainTimeout time.Duration
}

// Progress is a running count.
type Progress struct {
	// Written, Skipped, Failed and Recovered count the records this run
	// finished (see Summary).
	Written, Skipped, Failed, Recovered int64
	// Resumed counts the records passed over as done by an earlier run.
	Resumed int64
	// BytesRead is the input read so far.
	BytesRead int64
}

// Records is the number of records done, this run's and the earlier runs'
// passed over so far.
func (p Progress) Records() int64 {
	return p.Written + p.Skipped + p.Failed + p.Recovered + p.Resumed
}

// Summary is what an import or export did.
type Summary struct {
	// Written items (imported, or exported) by this run.
	Written int64
	// Skipped by this run: with CreateIfAbsent, items that already existed;
	// repeated ids kept out (DuplicatesFirst, DuplicatesLast).
	Skipped int64
	// Failed records, grouped by cause in Failures.
	Failed   int64
	Failures []FailureGroup
	// Recovered records were found written by an earlier run that was
	// killed before it could record them: a resumed import counts them
	// neither written nor failed.
	Recovered int64
	// Unfinished records were read but not written: the import stopped
	// (ctx ended, or the endpoint failed). A resumed import writes them.
	Unfinished int64
	// Earlier is what the earlier runs of a resumed import or export did,
	// as their state file recorded it.
	Earlier Counts
	// Duplicates counts the records of this run that repeat the id and
	// partition key of an earlier record; DuplicateExamples names some.
	Duplicates        int64
	DuplicateExamples []Duplicate
	Elapsed           time.Duration
}

// Duplicate is an id that several records of an input have.
type Duplicate struct {
	ID           string
	PartitionKey string
	// Records are the records' numbers (from 1): the first and a repeat.
	Records [2]int64
}

// FailureGroup counts the records that failed for one cause.
type FailureGroup struct {
	// Cause is the status and error code ("409 Conflict"), "invalid" for a
	// record that could not be sent, or "duplicate" for a repeated id.
	Cause string
	Count int64
	// Example is the first failure's message and record number (from 1).
	Example       string
	ExampleRecord int64
}

// String formats the summary for people.
func (s *Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d written, %d skipped, %d failed in %s", s.Written, s.Skipped, s.Failed, s.Elapsed.Round(time.Millisecond))
	if secs := s.Elapsed.Seconds(); secs > 0 && s.Written > 0 {
		fmt.Fprintf(&b, " (%.0f items/s)", float64(s.Written)/secs)
	}
	if s.Recovered > 0 {
		fmt.Fprintf(&b, "; %d found written by the run that was cut short", s.Recovered)
	}
	if s.Earlier.Total() > 0 || s.Recovered > 0 {
		fmt.Fprintf(&b, "\n  with the earlier runs: %d written, %d skipped, %d failed", s.Earlier.Written+s.Recovered+s.Written, s.Earlier.Skipped+s.Skipped, s.Earlier.Failed+s.Failed)
	}
	if s.Unfinished > 0 {
		fmt.Fprintf(&b, "\n  %d records not written: the import stopped before them", s.Unfinished)
	}
	if s.Duplicates > 0 {
		fmt.Fprintf(&b, "\n  %d records repeat the id and partition key of an earlier record:", s.Duplicates)
		for _, d := range s.DuplicateExamples {
			fmt.Fprintf(&b, " %q %s (records %d and %d);", d.ID, d.PartitionKey, d.Records[0], d.Records[1])
		}
		if int64(len(s.DuplicateExamples)) < s.Duplicates {
			b.WriteString(" …")
		}
	}
	for _, g := range s.Failures {
		fmt.Fprintf(&b, "\n  %d × %s, e.g. record %d: %s", g.Count, g.Cause, g.ExampleRecord, g.Example)
	}
	return b.String()
}

// ErrContainerNotFound is the error an import or export of a container
// that does not exist (or whose database does not) wraps.
var ErrContainerNotFound = errors.New("container not found")

// ErrStopped is the error an import wraps when the endpoint failed (a
// timeout, 429 after the SDK's retries, 503, a lost connection): it stops
// rather than count every record after as failed.
var ErrStopped = errors.New("import stopped")

// Import writes every record of r (a JSON array of items or JSON Lines) into
// the container. It returns when the input is exhausted, ctx ends or the
// endpoint fails; on an interruption the writes in flight are given
// DrainTimeout to be answered.
func Import(ctx context.Context, c *azcosmos.ContainerClient, r io.Reader, opts ImportOptions) (*Summary, error) {
	return runImport(ctx, c, r, nil, opts)
}

// ImportFile imports the file at path. With stateFile set the import is
// resumable: the state file records which records are done, and the same
// call after an interruption (ctx ended, the endpoint failed, the process
// killed) writes exactly the others. A record the interrupted run may have
// written without recording it is checked: in Create or CreateIfAbsent
// mode, an existing item with the record's content that was written since
// the first run began counts as recovered, not as a conflict. The state
// file names the container and the file; it is refused for another (or a
// changed file).
func ImportFile(ctx context.Context, c *azcosmos.ContainerClient, path, stateFile string, opts ImportOptions) (*Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rs *resumeState
	if stateFile != "" {
		rs = &resumeState{path: stateFile}
		if rs.input, err = fingerprintOf(f); err != nil {
			return nil, err
		}
		if rs.st, rs.exists, err = readState[importState](stateFile); err != nil {
			return nil, err
		}
		if rs.exists && rs.st.Input != nil && *rs.st.Input != *rs.input {
			return nil, fmt.Errorf("%s changed since the import that wrote %s (%d records done then): delete %s to import it from the start", path, stateFile, rs.st.Written+rs.st.Skipped+rs.st.Failed, stateFile)
		}
	}
	return runImport(ctx, c, f, rs, opts)
}

// resumeState is a resumable import's state file.
type resumeState struct {
	path   string
	st     importState
	exists bool
	input  *fingerprint
	mu     sync.Mutex // one save at a time
}

// Writes to one logical partition go in one transactional batch within the
// service's limits (100 operations, 2 MB); at most maxBuffered records wait
// for their batch to fill.
const (
	maxBatchOps   = 100
	maxBatchBytes = 1 << 20
	maxBuffered   = 5000
	// sentStep is how far past the records it sends a run records, before
	// sending them, that it may have written them: a state save every
	// sentStep records at most.
	sentStep = 4096
	// saveEvery is how often the state is saved besides.
	saveEvery = 500 * time.Millisecond
)

// Check reports options that an import would refuse: an unknown mode or
// duplicates rule, or DuplicatesLast without Upsert.
func (o ImportOptions) Check() error {
	_, err := o.withDefaults()
	return err
}

func (o ImportOptions) withDefaults() (ImportOptions, error) {
	if o.Mode == "" {
		o.Mode = Upsert
	}
	switch o.Mode {
	case Upsert, Create, CreateIfAbsent:
	default:
		return o, fmt.Errorf("unknown import mode %q (upsert, create or create-if-absent)", o.Mode)
	}
	if o.Duplicates == "" {
		o.Duplicates = DuplicatesFail
	}
	switch o.Duplicates {
	case DuplicatesFail, DuplicatesFirst:
	case DuplicatesLast:
		if o.Mode != Upsert {
			return o, fmt.Errorf("keeping the last of repeated ids needs mode upsert, not %s", o.Mode)
		}
	default:
		return o, fmt.Errorf("unknown duplicates rule %q (fail, first or last)", o.Duplicates)
	}
	return o, nil
}

func runImport(ctx context.Context, c *azcosmos.ContainerClient, r io.Reader, rs *resumeState, opts ImportOptions) (*Summary, error) {
	start := time.Now()
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 16
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 30 * time.Second
	}
	probeCtx, probe := probePolicy(ctx)
	props, err := c.Read(probeCtx, nil)
	if err != nil {
		if isStatus(err, http.StatusNotFound) {
			return nil, fmt.Errorf("container %s: %w", c.ID(), ErrContainerNotFound)
		}
		return nil, fmt.Errorf("reading the container %s: %w", c.ID(), err)
	}
	im := &importer{c: c, def: props.ContainerProperties.PartitionKeyDefinition, opts: opts, policy: probe.seen.Load(),
		failures: map[string]*FailureGroup{}, keys: map[dupKey]int64{}, deferred: map[dupKey]record{}}
	var st importState
	if rs != nil {
		st = rs.st
		rid := props.ContainerProperties.ResourceID
		if rs.exists && st.Container != "" && st.Container != rid {
			return nil, fmt.Errorf("%s records an import into another container (or one deleted since): delete it to import into %s from the start", rs.path, c.ID())
		}
		st.Container, st.Input = rid, rs.input
		if !rs.exists {
			st.Started = serverTime(props.RawResponse)
		}
	}
	im.started = st.Started
	im.t = newTracker(st)

	in := &countingReader{r: r}
	im.in = in
	recs := make(chan record, 1024)
	stopReading := make(chan struct{})
	readErr := make(chan error, 1)
	go func() {
		readErr <- readRecords(in, recs, stopReading)
		close(recs)
	}()

	// stopCtx ends when the caller's ctx does or the endpoint fails: no
	// write starts after. Writes in flight run on reqCtx, which outlives it
	// by the drain timeout.
	stopCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	reqCtx, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReqs()
	im.stop = stop
	finished := make(chan struct{})
	go func() {
		select {
		case <-stopCtx.Done():
			select {
			case <-time.After(opts.DrainTimeout):
				cancelReqs()
			case <-finished:
			}
		case <-finished:
		}
	}()
	defer close(finished)

	var saveErr atomic.Value
	save := func() {
		if rs == nil {
			return
		}
		rs.mu.Lock()
		defer rs.mu.Unlock()
		snap := im.t.snapshot(st)
		// A failed record's line is durable before the state calls it done.
		if s, ok := opts.Errors.(interface{ Sync() error }); ok {
			_ = s.Sync()
		}
		if err := writeState(rs.path, snap); err != nil {
			saveErr.CompareAndSwap(nil, err)
			stop(fmt.Errorf("saving the state: %w", err))
		}
	}
	stopTicker, tickerDone := make(chan struct{}), make(chan struct{})
	if rs != nil {
		save() // the container and the file it belongs to, at once
		go func() {
			defer close(tickerDone)
			tick := time.NewTicker(saveEvery)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					save()
				case <-stopTicker:
					return
				}
			}
		}()
	} else {
		close(tickerDone)
	}

	groups := map[string]*group{}
	buffered := 0
	var wg sync.WaitGroup
	sem := make(chan struct{}, opts.Concurrency)
	// dispatch sends one group's records on their way; false when stopped.
	dispatch := func(key string) bool {
		g := groups[key]
		delete(groups, key)
		buffered -= len(g.recs)
		select {
		case sem <- struct{}{}:
		case <-stopCtx.Done():
			return false
		}
		if rs != nil && im.t.sending(g.last(), sentStep) {
			save()
		}
		if stopCtx.Err() != nil {
			<-sem
			return false
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			im.writeGroup(reqCtx, g)
		}()
		return true
	}
	add := func(rec record, k itemKey) bool {
		key := k.canon
		if len(rec.item) > maxBatchBytes/2 {
			// A large item goes alone: it would crowd a batch out.
			key = "\x00alone"
		}
		g := groups[key]
		if g == nil {
			g = &group{key: k}
			groups[key] = g
		}
		g.recs = append(g.recs, rec)
		g.bytes += len(rec.item)
		buffered++
		if len(g.recs) >= maxBatchOps || g.bytes >= maxBatchBytes || key == "\x00alone" {
			if !dispatch(key) {
				return false
			}
		}
		if buffered >= maxBuffered {
			for _, k := range sortedKeys(groups) {
				if !dispatch(k) {
					return false
				}
			}
		}
		return true
	}
	flush := func() bool {
		for _, k := range sortedKeys(groups) {
			if !dispatch(k) {
				return false
			}
		}
		return true
	}

	stopped := false
	for rec := range recs {
		if stopCtx.Err() != nil {
			stopped = true
			break
		}
		if im.t.read(rec.n) {
			// Done by an earlier run; its id still counts for repeats.
			if rec.err == nil {
				if k, err := keyOf(im.def, rec.item); err == nil {
					if _, seen := im.keys[k.dupKey()]; !seen {
						im.keys[k.dupKey()] = rec.n
					}
				}
			}
			im.progress()
			continue
		}
		var k itemKey
		if rec.err == nil {
			k, rec.err = keyOf(im.def, rec.item)
			if rec.err != nil {
				rec.err = &InputError{rec.line, rec.col, rec.err.Error()}
			}
		}
		if rec.err != nil {
			im.fail(rec, "invalid", rec.err.Error())
			continue
		}
		if k.undefined() && !im.policy {
			im.fail(rec, "undefined partition key", fmt.Sprintf("the item has no value at %s; the client needs transfer.PartitionKeyPolicy to send the undefined partition key the service files it under", strings.Join(im.def.Paths, ", ")))
			continue
		}
		dk := k.dupKey()
		if first, seen := im.keys[dk]; seen {
			im.duplicate(rec, k, first)
			if im.opts.Duplicates == DuplicatesLast {
				if prev, ok := im.deferred[dk]; ok {
					im.finish(prev, skipped) // superseded by this one
				}
				rec.id = k.id
				im.deferred[dk] = rec
			}
			continue
		}
		im.keys[dk] = rec.n
		rec.id = k.id
		if !add(rec, k) {
			stopped = true
			break
		}
	}
	if !stopped && stopCtx.Err() == nil {
		stopped = !flush()
	}
	close(stopReading)
	for range recs {
	}
	rerr := <-readErr
	wg.Wait()
	if !stopped && stopCtx.Err() == nil && rerr == nil && len(im.deferred) > 0 {
		// The repeats kept last go once everything before them is done and
		// recorded so: a resumed run never writes an earlier one again.
		save()
		for _, rec := range sortedRecords(im.deferred) {
			k, _ := keyOf(im.def, rec.item)
			if !add(rec, k) {
				break
			}
		}
		flush()
		wg.Wait()
	}
	close(stopTicker)
	<-tickerDone
	save()
	sum := im.summary(time.Since(start))
	if err, ok := saveErr.Load().(error); ok {
		return sum, fmt.Errorf("saving the state to %s: %w", rs.path, err)
	}
	if cause := context.Cause(stopCtx); cause != nil && ctx.Err() == nil && !errors.Is(cause, context.Canceled) {
		return sum, fmt.Errorf("%w: %w", ErrStopped, cause)
	}
	if ctx.Err() != nil {
		return sum, ctx.Err()
	}
	if rerr != nil {
		return sum, fmt.Errorf("reading the input: %w", rerr)
	}
	return sum, nil
}

// serverTime is the service's clock from a response's Date header, in Unix
// seconds; 0 when there is none.
func serverTime(resp *http.Response) int64 {
	if resp == nil {
		return 0
	}
	t, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return 0
	}
	return t.Unix()
}

func sortedKeys(groups map[string]*group) []string {
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedRecords(m map[dupKey]record) []record {
	out := make([]record, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].n < out[j].n })
	return out
}

// group is the records of one logical partition waiting to be written.
type group struct {
	key   itemKey
	recs  []record
	bytes int
}

// last is the highest record number of the group.
func (g *group) last() int64 {
	n := int64(-1)
	for _, r := range g.recs {
		n = max(n, r.n)
	}
	return n
}

// importer holds an import's shared state.
type importer struct {
	c      *azcosmos.ContainerClient
	def    azcosmos.PartitionKeyDefinition
	opts   ImportOptions
	in     *countingReader
	t      *tracker
	policy bool // the client has PartitionKeyPolicy
	// started is the service's clock when the first run began (0: unknown).
	started int64
	stop    context.CancelCauseFunc

	// keys maps each item's id and partition key to its first record;
	// deferred holds the last repeat of each (DuplicatesLast). Both belong
	// to the reading loop.
	keys     map[dupKey]int64
	deferred map[dupKey]record

	mu         sync.Mutex
	failures   map[string]*FailureGroup
	duplicates int64
	examples   []Duplicate
	errMu      sync.Mutex
}

// ctxFor marks ctx with the partition key header the SDK cannot send.
func ctxFor(ctx context.Context, k itemKey) context.Context {
	if k.undefined() {
		return withPartitionKeyHeader(ctx, k.header)
	}
	return ctx
}

// writeGroup writes a group's records as one transactional batch; when the
// batch is refused (one record refused fails them all) each record is
// written alone, so that every refusal is counted with its own cause.
func (im *importer) writeGroup(ctx context.Context, g *group) {
	if im.opts.Mode != Upsert {
		var ok bool
		if g, ok = im.recover(ctx, g); !ok || len(g.recs) == 0 {
			return
		}
	}
	if len(g.recs) > 1 {
		b := im.c.NewTransactionalBatch(g.key.pk)
		for _, rec := range g.recs {
			if im.opts.Mode == Upsert {
				b.UpsertItem(rec.item, nil)
			} else {
				b.CreateItem(rec.item, nil)
			}
		}
		resp, err := im.c.ExecuteTransactionalBatch(ctxFor(ctx, g.key), b, nil)
		switch {
		case err == nil && resp.Success:
			for _, rec := range g.recs {
				im.finish(rec, written)
			}
			return
		case ctx.Err() != nil:
			return // abandoned: not done
		case err != nil && transient(err):
			im.stop(err)
			return
		}
	}
	for _, rec := range g.recs {
		if ctx.Err() != nil {
			return
		}
		im.write(ctx, g.key, rec)
	}
}

// write writes one record alone.
func (im *importer) write(ctx context.Context, k itemKey, rec record) {
	wctx := ctxFor(ctx, k)
	var err error
	opts := &azcosmos.ItemOptions{EnableContentResponseOnWrite: false}
	switch im.opts.Mode {
	case Upsert:
		_, err = im.c.UpsertItem(wctx, k.pk, rec.item, opts)
	default:
		_, err = im.c.CreateItem(wctx, k.pk, rec.item, opts)
	}
	if err == nil {
		im.finish(rec, written)
		return
	}
	if ctx.Err() != nil {
		return // abandoned: not done
	}
	if transient(err) {
		im.stop(err)
		return
	}
	if isStatus(err, http.StatusConflict) && im.opts.Mode != Upsert {
		if im.t.mayBeWritten(rec.n) {
			mine, rerr := im.writtenBefore(wctx, k, rec)
			if rerr != nil {
				if ctx.Err() == nil {
					im.stop(rerr)
				}
				return
			}
			if mine {
				im.finish(rec, recovered)
				return
			}
		}
		if im.opts.Mode == CreateIfAbsent {
			im.finish(rec, skipped)
			return
		}
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		cause, msg := responseCause(re)
		im.fail(rec, cause, msg)
		return
	}
	im.fail(rec, "error", err.Error())
}

// recover finds, with one query, the records of a group that an earlier
// run may have written without recording it and did write, counts them
// recovered and returns the group of the others; false when the import is
// stopping. (A create of each would answer 409, then need a read.)
func (im *importer) recover(ctx context.Context, g *group) (*group, bool) {
	var ids []string
	for _, rec := range g.recs {
		if im.t.mayBeWritten(rec.n) {
			ids = append(ids, rec.id)
		}
	}
	if len(ids) == 0 {
		return g, true
	}
	found := map[string][]byte{}
	pager := im.c.NewQueryItemsPager("SELECT * FROM c WHERE ARRAY_CONTAINS(@ids, c.id)", g.key.pk,
		&azcosmos.QueryOptions{QueryParameters: []azcosmos.QueryParameter{{Name: "@ids", Value: ids}}})
	qctx := ctxFor(ctx, g.key)
	for pager.More() {
		page, err := pager.NextPage(qctx)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return nil, false
			case transient(err):
				im.stop(err)
				return nil, false
			}
			return g, true // the writes will tell, one by one
		}
		for _, item := range page.Items {
			var v struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(item, &v) == nil {
				found[v.ID] = item
			}
		}
	}
	rest := &group{key: g.key}
	for _, rec := range g.recs {
		if stored, ok := found[rec.id]; ok && im.t.mayBeWritten(rec.n) && im.mine(stored, rec) {
			im.finish(rec, recovered)
			continue
		}
		rest.recs = append(rest.recs, rec)
		rest.bytes += len(rec.item)
	}
	return rest, true
}

// mine reports whether a stored item is the record as an earlier run of
// this import wrote it: the same content, written since the first run
// began.
func (im *importer) mine(stored []byte, rec record) bool {
	var sys struct {
		TS int64 `json:"_ts"`
	}
	_ = json.Unmarshal(stored, &sys)
	if im.started > 0 && sys.TS < im.started {
		return false
	}
	return sameItem(stored, rec.item)
}

// writtenBefore reports whether the item a create found existing is the
// record as an earlier run wrote it: the same content, written since the
// first run began.
func (im *importer) writtenBefore(ctx context.Context, k itemKey, rec record) (bool, error) {
	resp, err := im.c.ReadItem(ctx, k.pk, rec.id, nil)
	if isStatus(err, http.StatusNotFound) {
		return false, nil // deleted since: a conflict all the same
	}
	if err != nil {
		return false, err
	}
	return im.mine(resp.Value, rec), nil
}

// transient reports whether err says the endpoint cannot take writes now
// (after the SDK's own retries) rather than refusing this record: a lost
// connection, a timeout, throttling, an unavailable service.
func transient(err error) bool {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		switch re.StatusCode {
		case http.StatusRequestTimeout, http.StatusGone, http.StatusTooManyRequests, 449,
			http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	return true
}

func isStatus(err error, status int) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status
}

func (im *importer) finish(rec record, o outcome) {
	im.t.finish(rec.n, o)
	im.progress()
}

func (im *importer) progress() {
	if im.opts.Progress != nil {
		p := im.t.progress()
		p.BytesRead = im.in.bytesRead()
		im.opts.Progress(p)
	}
}

// duplicate counts a record that repeats an earlier one's id, and fails or
// skips it (DuplicatesLast: the caller defers it).
func (im *importer) duplicate(rec record, k itemKey, first int64) {
	im.mu.Lock()
	im.duplicates++
	if len(im.examples) < 10 {
		im.examples = append(im.examples, Duplicate{ID: k.id, PartitionKey: k.canon, Records: [2]int64{first + 1, rec.n + 1}})
	}
	im.mu.Unlock()
	switch im.opts.Duplicates {
	case DuplicatesFail:
		im.fail(rec, "duplicate", fmt.Sprintf("id %q with partition key %s is also record %d's", k.id, k.canon, first+1))
	case DuplicatesFirst:
		im.finish(rec, skipped)
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

// fail counts a record as failed for good, its line in the errors file
// first.
func (im *importer) fail(rec record, cause, msg string) {
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
			Line    int64  `json:"line"`
			Cause   string `json:"cause"`
			Message string `json:"message"`
			Item    string `json:"item"`
		}{rec.n + 1, rec.line, cause, msg, string(rec.item)})
		im.errMu.Lock()
		_, _ = im.opts.Errors.Write(append(line, '\n'))
		im.errMu.Unlock()
	}
	im.finish(rec, failed)
}

func (im *importer) summary(elapsed time.Duration) *Summary {
	p := im.t.progress()
	s := &Summary{Written: p.Written, Skipped: p.Skipped, Failed: p.Failed, Recovered: p.Recovered,
		Unfinished: im.t.unfinished(), Earlier: im.t.earlier, Elapsed: elapsed}
	im.mu.Lock()
	defer im.mu.Unlock()
	s.Duplicates, s.DuplicateExamples = im.duplicates, im.examples
	for _, g := range im.failures {
		s.Failures = append(s.Failures, *g)
	}
	sort.Slice(s.Failures, func(i, j int) bool { return s.Failures[i].Count > s.Failures[j].Count })
	return s
}
