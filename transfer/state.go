package transfer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"sync"
)

// importStateVersion is the layout of the state file this package writes.
// Version 0 (no "version") is the first layout: only "done", a watermark
// past which records may have been written.
const importStateVersion = 2

// importState is a resumable import's state file. A record is done when it
// was written, skipped or failed for good; a record that is not done and
// lies below SentBelow may have been written by a run that was killed
// before it could record it, and a resumed run checks it before counting a
// 409 as a failure.
type importState struct {
	Version int `json:"version"`
	// Done is the number of records, from the first, all done.
	Done int64 `json:"done"`
	// DoneAbove lists the further done records, as [first, end) ranges.
	DoneAbove [][2]int64 `json:"doneAbove,omitempty"`
	// SentBelow: no record at or past it was ever sent.
	SentBelow int64 `json:"sentBelow"`
	// Started is the service's clock, in Unix seconds, when the first run
	// began: an item a run wrote has a _ts no earlier.
	Started int64 `json:"started,omitempty"`
	// Written, Skipped and Failed count the done records by outcome over
	// every run so far.
	Written int64 `json:"written"`
	Skipped int64 `json:"skipped"`
	Failed  int64 `json:"failed"`
	// Container is the _rid of the container written to, Input the
	// fingerprint of the file read: a state file resumes only these.
	Container string       `json:"container,omitempty"`
	Input     *fingerprint `json:"input,omitempty"`
}

// fingerprint tells an input file from another: its size and the digests
// of its first and last MiB.
type fingerprint struct {
	Size int64  `json:"size"`
	Head string `json:"head"`
	Tail string `json:"tail"`
}

const fingerprintSpan = 1 << 20

func fingerprintOf(f *os.File) (*fingerprint, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	fp := &fingerprint{Size: st.Size()}
	digest := func(off int64) (string, error) {
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(f, off, fingerprintSpan)); err != nil {
			return "", err
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	if fp.Head, err = digest(0); err != nil {
		return nil, err
	}
	if fp.Tail, err = digest(max(0, fp.Size-fingerprintSpan)); err != nil {
		return nil, err
	}
	return fp, nil
}

// readState reads a state file; exists is false when there is none.
func readState[T any](path string) (st T, exists bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, true, fmt.Errorf("state file %s: %w (delete it to start over)", path, err)
	}
	return st, true, nil
}

// writeState replaces a state file atomically and durably.
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

// outcome is how a record was finished.
type outcome int

const (
	written outcome = iota
	skipped
	failed
	// recovered: found written by an earlier run that did not record it.
	recovered
)

// Counts are records by outcome.
type Counts struct {
	Written, Skipped, Failed int64
}

// Total is the number of records counted.
func (c Counts) Total() int64 { return c.Written + c.Skipped + c.Failed }

// tracker knows which records are done: those an earlier run recorded, and
// those of this run, which finish out of order.
type tracker struct {
	mu sync.Mutex
	// prev is the earlier runs' done records, sorted [first, end) ranges.
	prev [][2]int64
	// prevSentBelow: an earlier run may have written a record below it.
	prevSentBelow int64
	// next is the number of records read: every record below it is done,
	// or pending.
	next    int64
	pending map[int64]struct{}
	// sentBelow: this run has sent no record at or past it.
	sentBelow int64
	earlier   Counts
	run       Counts
	recovered int64
	resumed   int64 // records passed over as done by an earlier run
}

func newTracker(st importState) *tracker {
	t := &tracker{pending: map[int64]struct{}{}, prevSentBelow: st.SentBelow, sentBelow: st.SentBelow,
		earlier: Counts{st.Written, st.Skipped, st.Failed}}
	if st.Version == 0 && st.Done > 0 {
		// The first layout kept no bound on what was sent.
		t.prevSentBelow, t.sentBelow = math.MaxInt64, math.MaxInt64
	}
	if st.Done > 0 {
		t.prev = append(t.prev, [2]int64{0, st.Done})
	}
	t.prev = append(t.prev, st.DoneAbove...)
	sort.Slice(t.prev, func(i, j int) bool { return t.prev[i][0] < t.prev[j][0] })
	return t
}

// prevDone reports whether an earlier run finished record n.
func (t *tracker) prevDone(n int64) bool {
	i := sort.Search(len(t.prev), func(i int) bool { return t.prev[i][1] > n })
	return i < len(t.prev) && t.prev[i][0] <= n
}

// mayBeWritten reports whether an earlier run may have written record n
// (which it did not finish) without recording it.
func (t *tracker) mayBeWritten(n int64) bool { return n < t.prevSentBelow }

// read records that record n was read: it is done when an earlier run
// finished it, else pending until finished.
func (t *tracker) read(n int64) (done bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next = n + 1
	if t.prevDone(n) {
		t.resumed++
		return true
	}
	t.pending[n] = struct{}{}
	return false
}

// finish marks record n done with its outcome.
func (t *tracker) finish(n int64, o outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.pending[n]; !ok {
		return
	}
	delete(t.pending, n)
	switch o {
	case written:
		t.run.Written++
	case skipped:
		t.run.Skipped++
	case failed:
		t.run.Failed++
	case recovered:
		t.recovered++
	}
}

// unfinished is the number of records read and not done.
func (t *tracker) unfinished() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return int64(len(t.pending))
}

// sending reports whether the state must be saved before a record up to
// last is sent, and moves the bound past it by step.
func (t *tracker) sending(last, step int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if last < t.sentBelow {
		return false
	}
	t.sentBelow = max(t.next, last+1) + step
	return true
}

func (t *tracker) progress() Progress {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Progress{Written: t.run.Written, Skipped: t.run.Skipped, Failed: t.run.Failed, Recovered: t.recovered, Resumed: t.resumed}
}

// snapshot is the state to save: the done records, the bound on what was
// sent and the counts over every run.
func (t *tracker) snapshot(st importState) importState {
	t.mu.Lock()
	defer t.mu.Unlock()
	pend := make([]int64, 0, len(t.pending))
	for n := range t.pending {
		pend = append(pend, n)
	}
	slices.Sort(pend)
	var ranges [][2]int64
	add := func(a, b int64) {
		if a >= b {
			return
		}
		if k := len(ranges); k > 0 && ranges[k-1][1] >= a {
			ranges[k-1][1] = max(ranges[k-1][1], b)
			return
		}
		ranges = append(ranges, [2]int64{a, b})
	}
	start := int64(0)
	for _, n := range pend {
		add(start, n)
		start = n + 1
	}
	add(start, t.next)
	for _, r := range t.prev {
		if r[1] > t.next {
			add(max(r[0], t.next), r[1])
		}
	}
	st.Version = importStateVersion
	st.Done, st.DoneAbove = 0, nil
	if len(ranges) > 0 && ranges[0][0] == 0 {
		st.Done = ranges[0][1]
		ranges = ranges[1:]
	}
	st.DoneAbove = ranges
	st.SentBelow = t.sentBelow
	st.Written = t.earlier.Written + t.run.Written + t.recovered
	st.Skipped = t.earlier.Skipped + t.run.Skipped
	st.Failed = t.earlier.Failed + t.run.Failed
	return st
}
