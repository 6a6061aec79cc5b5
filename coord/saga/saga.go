// Package saga runs multi-step workflows across partitions or services (a
// purchase that holds a seat, charges a card, issues a ticket and sends a
// confirmation) where no transaction spans the steps: each step is an
// action paired with a compensation, and a failure undoes the steps already
// done, in reverse order.
//
// A saga instance is one document holding its state: the next step, each
// completed step, and, once an action failed, the list of steps still to
// compensate — written before any compensation runs, so a crash in the
// middle of compensating resumes compensating. Every transition is a write
// conditional on the document's ETag, so two executors can never both
// advance one saga; and an executor drives a saga only while it holds the
// saga's lease (coord/lock), so recoverers racing to resume a crashed saga
// take turns and exactly one drives it. After a crash, Resume continues from
// the recorded state instead of replaying blindly.
//
// Actions and compensations are called with an idempotency key (the saga id
// and the step name) that stays the same across retries and executors: the
// participant must apply each key at most once, and a compensation must be
// safe when its action never took effect (it then records that the key is
// cancelled, so a late action with that key is refused). The step whose
// action failed is compensated too, since a failed call may still have
// taken effect.
package saga

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord"
	"github.com/orrery-db/orrery/coord/lock"
)

// PartitionKeyPath is the partition key path a saga container must have.
const PartitionKeyPath = "/id"

var (
	// ErrNotFound means there is no saga with that id.
	ErrNotFound = errors.New("saga: not found")
	// ErrCompensationFailed means a compensation kept failing; the saga
	// is left in status coord.SagaCompensationFailed for an operator or a
	// later Resume.
	ErrCompensationFailed = errors.New("saga: compensation failed")
	// ErrPreempted means this executor stopped driving the saga because
	// its lease was lost or another executor advanced the saga; whoever
	// holds the lease now carries on.
	ErrPreempted = errors.New("saga: preempted by another executor")
)

// Call is what an action or a compensation is called with.
type Call struct {
	// SagaID is the saga instance's id.
	SagaID string
	// Step is the step's name.
	Step string
	// Key is the idempotency key of the step: SagaID + ":" + Step, the
	// same for every attempt, executor and the step's compensation.
	Key string
	// Input is the saga's input as given to Start.
	Input json.RawMessage
}

// Func is an action or a compensation. An action that returns an error
// fails the saga, which then compensates; a compensation that returns an
// error is retried.
type Func func(ctx context.Context, c Call) error

// Step is one step of a saga: an action and the compensation that undoes
// it (nil when there is nothing to undo, such as a notification).
type Step struct {
	// Name identifies the step in the saga document and in Call.Key; it
	// must not change while sagas that ran it may be resumed.
	Name string
	// Action does the step's work.
	Action Func
	// Compensate undoes Action, or is nil.
	Compensate Func
}

// Options tune an Executor. Locks is required.
type Options struct {
	// Locks grants the per-saga leases that make one executor at a time
	// drive a saga.
	Locks *lock.Locker
	// LeaseTTL is the lease's time to live: how long a crashed executor
	// holds up recovery. Default 10 s.
	LeaseTTL time.Duration
	// Owner names this executor in leases. Default host:pid.
	Owner string
	// CompensationAttempts is how many times a compensation is tried
	// before the saga is left in compensation_failed. Default 5.
	CompensationAttempts int
	// CompensationBackoff is the first wait between compensation attempts;
	// it doubles, up to 5 s. Default 100 ms.
	CompensationBackoff time.Duration
}

// Executor runs the sagas of one definition (an ordered list of steps)
// stored in one container.
type Executor struct {
	c     *azcosmos.ContainerClient
	name  string
	steps []Step
	o     Options
}

// New returns an executor for sagas named name made of steps, stored in c
// (a container with partition key PartitionKeyPath; CreateContainer makes
// one).
func New(c *azcosmos.ContainerClient, name string, steps []Step, o Options) (*Executor, error) {
	if o.Locks == nil {
		return nil, errors.New("saga: Options.Locks is required")
	}
	seen := map[string]bool{}
	for _, s := range steps {
		if s.Name == "" || s.Action == nil || seen[s.Name] {
			return nil, fmt.Errorf("saga: step %q needs a unique non-empty name and an action", s.Name)
		}
		seen[s.Name] = true
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 10 * time.Second
	}
	if o.CompensationAttempts <= 0 {
		o.CompensationAttempts = 5
	}
	if o.CompensationBackoff <= 0 {
		o.CompensationBackoff = 100 * time.Millisecond
	}
	return &Executor{c: c, name: name, steps: steps, o: o}, nil
}

// CreateContainer creates a saga container fit for New in db if it does
// not exist, and returns it.
func CreateContainer(ctx context.Context, db *azcosmos.DatabaseClient, id string) (*azcosmos.ContainerClient, error) {
	_, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{
		ID:                     id,
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{PartitionKeyPath}},
	}, nil)
	if err != nil && statusOf(err) != http.StatusConflict {
		return nil, fmt.Errorf("saga: creating container %q: %w", id, err)
	}
	return db.NewContainer(id)
}

// State is a saga instance's recorded state.
type State struct {
	// ID is the saga instance's id (and its document's).
	ID string `json:"id"`
	// Saga is the name of the executor's definition.
	Saga string `json:"saga"`
	// Status is where the saga stands.
	Status coord.SagaStatus `json:"status"`
	// Input is the input given to Start, as JSON.
	Input json.RawMessage `json:"input,omitempty"`
	// Next is the index of the next action to run while running.
	Next int `json:"next"`
	// Completed lists the steps whose action completed, in order.
	Completed []string `json:"completed"`
	// Compensate lists the steps still to compensate, in the order they
	// will be: recorded when the saga starts compensating, before any
	// compensation runs, and shortened as each one completes.
	Compensate []string `json:"compensate"`
	// Compensated lists the steps compensated so far, in order.
	Compensated []string `json:"compensated"`
	// FailedStep and Error say which action failed and why; Error also
	// holds a compensation's last error in compensation_failed.
	FailedStep string `json:"failedStep,omitempty"`
	Error      string `json:"error,omitempty"`
	// Rev counts transitions; Writer is the lease owner of the last one.
	// Together they settle an ambiguous write.
	Rev    int    `json:"rev"`
	Writer string `json:"writer,omitempty"`
	// ETag is the document's ETag when read.
	ETag azcore.ETag `json:"-"`
}

// Start records a new saga instance with its input and drives it to the
// end. Starting an id that exists already resumes it instead (a retried
// Start is harmless). If ctx is cancelled while an action runs the saga
// fails and compensates, and the compensations run to completion
// regardless of ctx.
func (e *Executor) Start(ctx context.Context, id string, input any) (State, error) {
	raw, err := json.Marshal(input)
	if err != nil {
		return State{}, fmt.Errorf("saga: encoding input: %w", err)
	}
	st := State{ID: id, Saga: e.name, Status: coord.SagaRunning, Input: raw, Completed: []string{}, Compensate: []string{}, Compensated: []string{}}
	b, _ := json.Marshal(st)
	if _, err := e.c.CreateItem(ctx, azcosmos.NewPartitionKeyString(id), b, nil); err != nil && statusOf(err) != http.StatusConflict {
		return State{}, fmt.Errorf("saga: recording %q: %w", id, err)
	}
	return e.Resume(ctx, id)
}

// Get reads a saga's recorded state.
func (e *Executor) Get(ctx context.Context, id string) (State, error) {
	r, err := e.c.ReadItem(ctx, azcosmos.NewPartitionKeyString(id), id, nil)
	if statusOf(err) == http.StatusNotFound {
		return State{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err != nil {
		return State{}, err
	}
	var st State
	if err := json.Unmarshal(r.Value, &st); err != nil {
		return State{}, fmt.Errorf("saga: decoding %q: %w", id, err)
	}
	st.ETag = r.ETag
	return st, nil
}

// Resume takes the saga's lease (waiting while another executor holds it)
// and drives the saga from its recorded state to a terminal status: a
// running saga goes on with its next action, a compensating one with its
// next compensation, a compensation_failed one tries its compensations
// again. Several recoverers may call Resume on one saga at once: they take
// turns, the first drives it to the end and the others find it finished.
func (e *Executor) Resume(ctx context.Context, id string) (State, error) {
	h, err := e.o.Locks.Acquire(ctx, "saga."+id, &lock.Options{TTL: e.o.LeaseTTL, Owner: e.o.Owner})
	if err != nil {
		return State{}, fmt.Errorf("saga: taking the lease of %q: %w", id, err)
	}
	defer h.Release(context.WithoutCancel(ctx))
	st, err := e.Get(ctx, id)
	if err != nil {
		return State{}, err
	}
	if st.Saga != e.name {
		return st, fmt.Errorf("saga: %q is a %q saga, not %q", id, st.Saga, e.name)
	}
	return e.drive(ctx, h, st)
}

// ErrBusy means another executor holds the saga's lease (TryResume).
var ErrBusy = errors.New("saga: another executor is driving it")

// TryResume is Resume without waiting: ErrBusy (wrapped) when another
// executor holds the saga's lease, as a live executor normally does.
func (e *Executor) TryResume(ctx context.Context, id string) (State, error) {
	h, err := e.o.Locks.TryAcquire(ctx, "saga."+id, &lock.Options{TTL: e.o.LeaseTTL, Owner: e.o.Owner})
	if errors.Is(err, lock.ErrHeld) {
		return State{}, fmt.Errorf("%w: %v", ErrBusy, err)
	}
	if err != nil {
		return State{}, fmt.Errorf("saga: taking the lease of %q: %w", id, err)
	}
	defer h.Release(context.WithoutCancel(ctx))
	st, err := e.Get(ctx, id)
	if err != nil {
		return State{}, err
	}
	return e.drive(ctx, h, st)
}

// Unfinished lists the ids of this executor's sagas that are running or
// compensating: those a recoverer passes to TryResume (sagas whose executor
// is alive answer ErrBusy). Sagas in compensation_failed are left to an
// operator's Resume. It is a query across partitions.
func (e *Executor) Unfinished(ctx context.Context) ([]string, error) {
	q := "SELECT c.id FROM c WHERE c.saga = @saga AND (c.status = @running OR c.status = @compensating)"
	pager := e.c.NewQueryItemsPager(q, azcosmos.NewPartitionKey(), &azcosmos.QueryOptions{QueryParameters: []azcosmos.QueryParameter{
		{Name: "@saga", Value: e.name},
		{Name: "@running", Value: string(coord.SagaRunning)},
		{Name: "@compensating", Value: string(coord.SagaCompensating)},
	}})
	var ids []string
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("saga: listing unfinished sagas: %w", err)
		}
		for _, it := range page.Items {
			var v struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(it, &v); err != nil {
				return nil, err
			}
			ids = append(ids, v.ID)
		}
	}
	return ids, nil
}

// drive runs the saga while h is held, until a terminal status.
func (e *Executor) drive(ctx context.Context, h *lock.Lock, st State) (State, error) {
	owner := h.Lease().Owner
	// Compensations and transitions run on a context that ignores the
	// caller's cancellation but not the loss of the lease.
	detached, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() {
		select {
		case <-h.Lost():
			stop()
		case <-detached.Done():
		}
	}()
	for {
		if h.Err() != nil {
			return st, fmt.Errorf("%w: %v", ErrPreempted, h.Err())
		}
		next := st
		next.Completed = slices.Clone(st.Completed)
		next.Compensate = slices.Clone(st.Compensate)
		next.Compensated = slices.Clone(st.Compensated)
		switch st.Status {
		case coord.SagaCompleted, coord.SagaCompensated:
			return st, nil
		case coord.SagaCompensationFailed:
			next.Status = coord.SagaCompensating
		case coord.SagaRunning:
			if st.Next >= len(e.steps) {
				next.Status = coord.SagaCompleted
				break
			}
			step := e.steps[st.Next]
			actx, cancel := context.WithCancel(ctx)
			go func() {
				select {
				case <-h.Lost():
					cancel()
				case <-actx.Done():
				}
			}()
			err := step.Action(actx, e.call(st, step))
			cancel()
			if h.Err() != nil {
				// Whoever holds the lease now decides what happened.
				return st, fmt.Errorf("%w: %v", ErrPreempted, h.Err())
			}
			if err == nil {
				next.Completed = append(next.Completed, step.Name)
				next.Next++
				if next.Next == len(e.steps) {
					next.Status = coord.SagaCompleted
				}
				break
			}
			// The compensation intent is recorded before any compensation
			// runs: every completed step and the failed one, newest first.
			next.Status = coord.SagaCompensating
			next.FailedStep, next.Error = step.Name, err.Error()
			for i := st.Next; i >= 0; i-- {
				if e.steps[i].Compensate != nil {
					next.Compensate = append(next.Compensate, e.steps[i].Name)
				}
			}
		case coord.SagaCompensating:
			if len(st.Compensate) == 0 {
				next.Status = coord.SagaCompensated
				break
			}
			step, ok := e.step(st.Compensate[0])
			if !ok {
				return st, fmt.Errorf("saga: %q records unknown step %q", st.ID, st.Compensate[0])
			}
			if err := e.compensate(detached, h, st, step); err != nil {
				if h.Err() != nil {
					return st, fmt.Errorf("%w: %v", ErrPreempted, h.Err())
				}
				next.Status = coord.SagaCompensationFailed
				next.Error = fmt.Sprintf("compensating %s: %v", step.Name, err)
				st, werr := e.write(detached, st, next, owner)
				if werr != nil {
					return st, werr
				}
				return st, fmt.Errorf("%w: %s", ErrCompensationFailed, next.Error)
			}
			next.Compensate = next.Compensate[1:]
			next.Compensated = append(next.Compensated, step.Name)
			if len(next.Compensate) == 0 {
				next.Status = coord.SagaCompensated
			}
		default:
			return st, fmt.Errorf("saga: %q has unknown status %q", st.ID, st.Status)
		}
		var err error
		if st, err = e.write(detached, st, next, owner); err != nil {
			return st, err
		}
	}
}

func (e *Executor) call(st State, s Step) Call {
	return Call{SagaID: st.ID, Step: s.Name, Key: st.ID + ":" + s.Name, Input: st.Input}
}

func (e *Executor) step(name string) (Step, bool) {
	for _, s := range e.steps {
		if s.Name == name {
			return s, true
		}
	}
	return Step{}, false
}

// compensate runs a step's compensation, retrying with backoff.
func (e *Executor) compensate(ctx context.Context, h *lock.Lock, st State, s Step) error {
	wait := e.o.CompensationBackoff
	var err error
	for attempt := 1; ; attempt++ {
		if err = s.Compensate(ctx, e.call(st, s)); err == nil {
			return nil
		}
		if attempt >= e.o.CompensationAttempts || h.Err() != nil {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// write records the transition from cur to next, conditional on cur's
// ETag. A lost reply is settled by reading back Rev and Writer.
func (e *Executor) write(ctx context.Context, cur, next State, owner string) (State, error) {
	next.Rev = cur.Rev + 1
	next.Writer = owner
	b, err := json.Marshal(next)
	if err != nil {
		return cur, err
	}
	pk := azcosmos.NewPartitionKeyString(cur.ID)
	for attempt := 0; ; attempt++ {
		etag := cur.ETag
		r, err := e.c.ReplaceItem(ctx, pk, cur.ID, b, &azcosmos.ItemOptions{IfMatchEtag: &etag})
		if err == nil {
			next.ETag = r.ETag
			return next, nil
		}
		if statusOf(err) != http.StatusPreconditionFailed && statusOf(err) != 0 {
			return cur, fmt.Errorf("saga: recording %q: %w", cur.ID, err)
		}
		if ctx.Err() != nil {
			return cur, fmt.Errorf("%w: %v", ErrPreempted, ctx.Err())
		}
		// Refused or ambiguous: did our write apply?
		now, gerr := e.Get(ctx, cur.ID)
		if gerr != nil {
			if attempt < 5 {
				continue
			}
			return cur, gerr
		}
		switch {
		case now.Rev == next.Rev && now.Writer == owner:
			return now, nil
		case now.Rev == cur.Rev && now.ETag == cur.ETag && attempt < 5:
			continue // it did not apply: try again
		}
		return now, fmt.Errorf("%w: %q moved to revision %d by %s", ErrPreempted, cur.ID, now.Rev, now.Writer)
	}
}

func statusOf(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

// NewID returns a random saga id.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
