package saga

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord/internal/status"
	"github.com/orrery-db/orrery/coord/lock"
)

// PartitionKeyPath is the partition key path a saga container must have.
const PartitionKeyPath = "/id"

// Status is where a saga instance stands.
type Status string

const (
	// Running: actions are being executed in order.
	Running Status = "running"
	// Compensating: an action failed; the steps are being compensated in
	// reverse order.
	Compensating Status = "compensating"
	// Completed: every action ran. Terminal.
	Completed Status = "completed"
	// Compensated: every step that ran was compensated. Terminal.
	Compensated Status = "compensated"
	// CompensationFailed: a compensation kept failing; the saga stopped
	// with the failing step recorded, for an operator or a later Resume.
	CompensationFailed Status = "compensation_failed"
)

// Terminal reports whether no further transition will happen on its own.
// A saga whose compensation failed is terminal until it is resumed.
func (s Status) Terminal() bool {
	return s == Completed || s == Compensated || s == CompensationFailed
}

var (
	// ErrNotFound means there is no saga with that id.
	ErrNotFound = errors.New("saga: not found")
	// ErrCompensationFailed means a compensation kept failing; the saga
	// is left in status CompensationFailed for an operator or a later
	// Resume.
	ErrCompensationFailed = errors.New("saga: compensation failed")
	// ErrPreempted means this executor stopped driving the saga because
	// its lease was lost or another executor advanced the saga; whoever
	// holds the lease now carries on.
	ErrPreempted = errors.New("saga: preempted by another executor")
	// ErrBusy means another executor holds the saga's lease (TryResume).
	ErrBusy = errors.New("saga: another executor is driving it")
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
	// Attempt counts the tries of this action or compensation by this
	// executor, from 1. (A recoverer counts again from 1.)
	Attempt int
	// Completed is, for a compensation, whether this step's action
	// completed (its output, if any, is then recorded). It is false for
	// the step whose action failed: that action may or may not have taken
	// effect. For an action it is false.
	Completed bool
	// Outputs are the recorded outputs of the steps whose actions
	// completed, by step name, as JSON.
	Outputs map[string]json.RawMessage
}

// Output decodes the recorded output of step into v. It reports false when
// that step recorded none (it did not complete, or returned a nil output).
func (c Call) Output(step string, v any) (bool, error) {
	raw, ok := c.Outputs[step]
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("saga: decoding the output of %q: %w", step, err)
	}
	return true, nil
}

// Action does a step's work and returns its output, recorded as JSON with
// the step's completion (nil records nothing). An error fails the attempt:
// it is retried under the step's RetryPolicy unless wrapped with Permanent,
// and once the attempts are spent the saga compensates.
type Action func(ctx context.Context, c Call) (output any, err error)

// Compensation undoes a step. An error fails the attempt; it is retried
// under the step's compensation RetryPolicy, and once the attempts are spent
// the saga is left in CompensationFailed.
type Compensation func(ctx context.Context, c Call) error

// RetryPolicy says how often a failed attempt is tried again. A zero field
// takes the executor's value (Options).
type RetryPolicy struct {
	// Attempts is the number of tries in all, at least 1.
	Attempts int
	// Backoff is the wait after the first failed try; it doubles after
	// each further one, up to MaxBackoff. Each wait is drawn uniformly
	// from its lower half to its whole (jitter).
	Backoff    time.Duration
	MaxBackoff time.Duration
}

func (p RetryPolicy) or(d RetryPolicy) RetryPolicy {
	if p.Attempts <= 0 {
		p.Attempts = d.Attempts
	}
	if p.Backoff <= 0 {
		p.Backoff = d.Backoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = d.MaxBackoff
	}
	p.MaxBackoff = max(p.MaxBackoff, p.Backoff)
	return p
}

// permanent marks an error not to retry.
type permanent struct{ err error }

// Error is the wrapped error's message.
func (p permanent) Error() string { return p.err.Error() }

// Unwrap returns the wrapped error.
func (p permanent) Unwrap() error { return p.err }

// Permanent wraps an action's error so that it is not retried (a declined
// card, an invalid order): the saga compensates at once. errors.Is and
// errors.As see through it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err was wrapped with Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

// Step is one step of a saga: an action and the compensation that undoes
// it (nil when there is nothing to undo, such as a notification), with how
// each is retried and bounded in time.
type Step struct {
	// Name identifies the step in the saga document and in Call.Key; it
	// must not change while sagas that ran it may be resumed.
	Name string
	// Action does the step's work.
	Action Action
	// Compensate undoes Action, or is nil.
	Compensate Compensation
	// Retry is how a failed attempt of Action is retried; zero fields take
	// Options.Retry's.
	Retry RetryPolicy
	// Timeout bounds each attempt of Action (0: Options.Timeout). An
	// attempt past it is cancelled and counts as failed: the participant
	// may still have applied it, which its idempotency key makes safe to
	// try again.
	Timeout time.Duration
	// CompensationRetry is how a failed attempt of Compensate is retried;
	// zero fields take Options.CompensationRetry's.
	CompensationRetry RetryPolicy
	// CompensationTimeout bounds each attempt of Compensate (0:
	// Options.CompensationTimeout).
	CompensationTimeout time.Duration
}

// Options tune an Executor. The zero value (or nil) takes every default.
type Options struct {
	// LeaseTTL is the time to live of the per-saga lease: how long a
	// crashed executor holds up recovery. Default 10 s.
	LeaseTTL time.Duration
	// Owner names this executor in leases. Default host:pid.
	Owner string
	// Retry is the default retry policy of actions. Default 3 attempts,
	// backoff 100 ms doubling up to 5 s.
	Retry RetryPolicy
	// Timeout is the default bound of each attempt of an action; default
	// none.
	Timeout time.Duration
	// CompensationRetry is the default retry policy of compensations.
	// Default 5 attempts, backoff 100 ms doubling up to 5 s.
	CompensationRetry RetryPolicy
	// CompensationTimeout is the default bound of each attempt of a
	// compensation; default none.
	CompensationTimeout time.Duration
}

// Executor runs the sagas of one definition (an ordered list of steps)
// stored in one container.
type Executor struct {
	c     *azcosmos.ContainerClient
	name  string
	steps []Step
	locks *lock.Locker
	o     Options
}

// New returns an executor for sagas named name made of steps, stored in c
// (a container with partition key PartitionKeyPath; CreateContainer makes
// one), taking per-saga leases from locks.
func New(c *azcosmos.ContainerClient, name string, steps []Step, locks *lock.Locker, opts *Options) (*Executor, error) {
	if c == nil || locks == nil {
		return nil, errors.New("saga: New needs a container and a lock.Locker")
	}
	if name == "" {
		return nil, errors.New("saga: a saga definition needs a name")
	}
	seen := map[string]bool{}
	for _, s := range steps {
		if s.Name == "" || s.Action == nil || seen[s.Name] {
			return nil, fmt.Errorf("saga: step %q needs a unique non-empty name and an action", s.Name)
		}
		seen[s.Name] = true
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 10 * time.Second
	}
	o.Retry = o.Retry.or(RetryPolicy{Attempts: 3, Backoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second})
	o.CompensationRetry = o.CompensationRetry.or(RetryPolicy{Attempts: 5, Backoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second})
	return &Executor{c: c, name: name, steps: slices.Clone(steps), locks: locks, o: o}, nil
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
	Status Status `json:"status"`
	// Input is the input given to Start, as JSON.
	Input json.RawMessage `json:"input,omitempty"`
	// Next is the index of the next action to run while running.
	Next int `json:"next"`
	// Completed lists the steps whose action completed, in order.
	Completed []string `json:"completed"`
	// Outputs are the outputs the completed steps' actions returned, by
	// step name, recorded with each step's completion.
	Outputs map[string]json.RawMessage `json:"outputs,omitempty"`
	// Compensate lists the steps still to compensate, in the order they
	// will be: recorded when the saga starts compensating, before any
	// compensation runs, and shortened as each one completes.
	Compensate []string `json:"compensate"`
	// Compensated lists the steps compensated so far, in order.
	Compensated []string `json:"compensated"`
	// FailedStep and Error say which action failed and why; Error also
	// holds a compensation's last error in compensation_failed. Attempts
	// is how many times the failed action or compensation was tried.
	FailedStep string `json:"failedStep,omitempty"`
	Error      string `json:"error,omitempty"`
	Attempts   int    `json:"attempts,omitempty"`
	// Rev counts transitions; Writer is the lease owner of the last one.
	// Together they settle an ambiguous write.
	Rev    int    `json:"rev"`
	Writer string `json:"writer,omitempty"`
	// ETag is the document's ETag when read.
	ETag azcore.ETag `json:"-"`
	// Updated is when the document was last written, by the server's
	// clock (one-second resolution).
	Updated time.Time `json:"-"`
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
	st := State{ID: id, Saga: e.name, Status: Running, Input: raw, Completed: []string{}, Compensate: []string{}, Compensated: []string{}}
	b, _ := json.Marshal(st)
	// A create whose reply was lost may have applied: its retry is a 409,
	// and the saga is there to resume.
	err = retryTransient(ctx, func() error {
		_, err := e.c.CreateItem(ctx, azcosmos.NewPartitionKeyString(id), b, nil)
		if statusOf(err) == http.StatusConflict {
			return nil
		}
		return err
	})
	if err != nil {
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
	st, err := decodeState(r.Value)
	if err != nil {
		return State{}, fmt.Errorf("saga: decoding %q: %w", id, err)
	}
	st.ETag = r.ETag
	return st, nil
}

func decodeState(b []byte) (State, error) {
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return State{}, err
	}
	var sys struct {
		TS int64 `json:"_ts"`
	}
	if json.Unmarshal(b, &sys) == nil && sys.TS > 0 {
		st.Updated = time.Unix(sys.TS, 0)
	}
	return st, nil
}

func (e *Executor) leaseOptions() *lock.Options {
	return &lock.Options{TTL: e.o.LeaseTTL, Owner: e.o.Owner}
}

// Resume takes the saga's lease (waiting while another executor holds it)
// and drives the saga from its recorded state to a terminal status: a
// running saga goes on with its next action, a compensating one with its
// next compensation, a compensation_failed one tries its compensations
// again. Several recoverers may call Resume on one saga at once: they take
// turns, the first drives it to the end and the others find it finished.
func (e *Executor) Resume(ctx context.Context, id string) (State, error) {
	h, err := e.locks.Acquire(ctx, "saga."+id, e.leaseOptions())
	if err != nil {
		return State{}, fmt.Errorf("saga: taking the lease of %q: %w", id, err)
	}
	return e.driveHeld(ctx, h, id)
}

// TryResume is Resume without waiting: ErrBusy (wrapped) when another
// executor holds the saga's lease, as a live executor normally does.
func (e *Executor) TryResume(ctx context.Context, id string) (State, error) {
	h, err := e.locks.TryAcquire(ctx, "saga."+id, e.leaseOptions())
	if errors.Is(err, lock.ErrHeld) {
		return State{}, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	if err != nil {
		return State{}, fmt.Errorf("saga: taking the lease of %q: %w", id, err)
	}
	return e.driveHeld(ctx, h, id)
}

func (e *Executor) driveHeld(ctx context.Context, h *lock.Lock, id string) (State, error) {
	defer h.Release(context.WithoutCancel(ctx))
	var st State
	err := retryTransient(ctx, func() (err error) {
		st, err = e.Get(ctx, id)
		return err
	})
	if err != nil {
		return State{}, err
	}
	if st.Saga != e.name {
		return st, fmt.Errorf("saga: %q is a %q saga, not %q", id, st.Saga, e.name)
	}
	return e.drive(ctx, h, st)
}

// Unfinished lists this executor's sagas that have not ended well: those
// running or compensating (a recoverer passes them to TryResume; those
// whose executor is alive answer ErrBusy) and those left in
// compensation_failed (for an operator, or a Resume once the participant
// is back), with their recorded state: which step failed, why, and what is
// still to compensate. It is a query across partitions.
func (e *Executor) Unfinished(ctx context.Context) ([]State, error) {
	q := "SELECT * FROM c WHERE c.saga = @saga AND (c.status = @running OR c.status = @compensating OR c.status = @failed)"
	pager := e.c.NewQueryItemsPager(q, azcosmos.NewPartitionKey(), &azcosmos.QueryOptions{QueryParameters: []azcosmos.QueryParameter{
		{Name: "@saga", Value: e.name},
		{Name: "@running", Value: string(Running)},
		{Name: "@compensating", Value: string(Compensating)},
		{Name: "@failed", Value: string(CompensationFailed)},
	}})
	var out []State
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("saga: listing unfinished sagas: %w", err)
		}
		for _, it := range page.Items {
			st, err := decodeState(it)
			if err != nil {
				return nil, fmt.Errorf("saga: decoding a saga: %w", err)
			}
			var sys struct {
				ETag azcore.ETag `json:"_etag"`
			}
			_ = json.Unmarshal(it, &sys)
			st.ETag = sys.ETag
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b State) int { return a.Updated.Compare(b.Updated) })
	return out, nil
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
		next.Outputs = cloneOutputs(st.Outputs)
		switch st.Status {
		case Completed, Compensated:
			return st, nil
		case CompensationFailed:
			next.Status = Compensating
		case Running:
			if st.Next >= len(e.steps) {
				next.Status = Completed
				break
			}
			step := e.steps[st.Next]
			out, attempts, err := e.act(ctx, h, st, step)
			if h.Err() != nil {
				// Whoever holds the lease now decides what happened.
				return st, fmt.Errorf("%w: %v", ErrPreempted, h.Err())
			}
			if err == nil {
				next.Completed = append(next.Completed, step.Name)
				if out != nil {
					if next.Outputs == nil {
						next.Outputs = map[string]json.RawMessage{}
					}
					next.Outputs[step.Name] = out
				}
				next.Next++
				if next.Next == len(e.steps) {
					next.Status = Completed
				}
				break
			}
			// The compensation intent is recorded before any compensation
			// runs: every completed step and the failed one, newest first.
			next.Status = Compensating
			next.FailedStep, next.Error, next.Attempts = step.Name, err.Error(), attempts
			for i := st.Next; i >= 0; i-- {
				if e.steps[i].Compensate != nil {
					next.Compensate = append(next.Compensate, e.steps[i].Name)
				}
			}
		case Compensating:
			if len(st.Compensate) == 0 {
				next.Status = Compensated
				break
			}
			step, ok := e.step(st.Compensate[0])
			if !ok {
				return st, fmt.Errorf("saga: %q records unknown step %q", st.ID, st.Compensate[0])
			}
			if attempts, err := e.compensate(detached, h, st, step); err != nil {
				if h.Err() != nil {
					return st, fmt.Errorf("%w: %v", ErrPreempted, h.Err())
				}
				next.Status = CompensationFailed
				next.Error = fmt.Sprintf("compensating %s: %v", step.Name, err)
				next.Attempts = attempts
				st, werr := e.write(detached, st, next, owner)
				if werr != nil {
					return st, werr
				}
				return st, fmt.Errorf("%w: %s", ErrCompensationFailed, next.Error)
			}
			next.Compensate = next.Compensate[1:]
			next.Compensated = append(next.Compensated, step.Name)
			if len(next.Compensate) == 0 {
				next.Status = Compensated
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

func cloneOutputs(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (e *Executor) call(st State, s Step, attempt int, completed bool) Call {
	return Call{SagaID: st.ID, Step: s.Name, Key: st.ID + ":" + s.Name, Input: st.Input,
		Attempt: attempt, Completed: completed, Outputs: cloneOutputs(st.Outputs)}
}

func (e *Executor) step(name string) (Step, bool) {
	for _, s := range e.steps {
		if s.Name == name {
			return s, true
		}
	}
	return Step{}, false
}

// act runs a step's action under its retry policy and timeout, on a
// context that ends with the caller's or with the loss of the lease. It
// returns the output as JSON and the number of attempts made.
func (e *Executor) act(ctx context.Context, h *lock.Lock, st State, s Step) (json.RawMessage, int, error) {
	policy := s.Retry.or(e.o.Retry)
	timeout := cmpDuration(s.Timeout, e.o.Timeout)
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-h.Lost():
			cancel()
		case <-actx.Done():
		}
	}()
	var err error
	for attempt := 1; ; attempt++ {
		var out any
		out, err = attemptWith(actx, timeout, func(c context.Context) (any, error) {
			return s.Action(c, e.call(st, s, attempt, false))
		})
		if err == nil {
			if out == nil {
				return nil, attempt, nil
			}
			raw, merr := json.Marshal(out)
			if merr != nil {
				return nil, attempt, fmt.Errorf("saga: encoding the output of %q: %w", s.Name, merr)
			}
			return raw, attempt, nil
		}
		if IsPermanent(err) || attempt >= policy.Attempts || actx.Err() != nil {
			return nil, attempt, err
		}
		if werr := sleep(actx, policy.wait(attempt)); werr != nil {
			return nil, attempt, errors.Join(err, werr)
		}
	}
}

// compensate runs a step's compensation under its retry policy and
// timeout. It returns the number of attempts made.
func (e *Executor) compensate(ctx context.Context, h *lock.Lock, st State, s Step) (int, error) {
	policy := s.CompensationRetry.or(e.o.CompensationRetry)
	timeout := cmpDuration(s.CompensationTimeout, e.o.CompensationTimeout)
	completed := slices.Contains(st.Completed, s.Name)
	var err error
	for attempt := 1; ; attempt++ {
		_, err = attemptWith(ctx, timeout, func(c context.Context) (any, error) {
			return nil, s.Compensate(c, e.call(st, s, attempt, completed))
		})
		if err == nil {
			return attempt, nil
		}
		if attempt >= policy.Attempts || h.Err() != nil {
			return attempt, err
		}
		if werr := sleep(ctx, policy.wait(attempt)); werr != nil {
			return attempt, errors.Join(err, werr)
		}
	}
}

// attemptWith runs f once, bounded by timeout when positive. An attempt
// that ran out of time fails with context.DeadlineExceeded even if f
// ignored its context and returned nil late.
func attemptWith(ctx context.Context, timeout time.Duration, f func(context.Context) (any, error)) (any, error) {
	if timeout <= 0 {
		return f(ctx)
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := f(tctx)
	if err == nil && tctx.Err() != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("saga: attempt ran past its timeout of %v: %w", timeout, context.DeadlineExceeded)
	}
	if err != nil && errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (timeout %v: %w)", err, timeout, context.DeadlineExceeded)
	}
	return out, err
}

// wait is the backoff after the attempt-th failed try.
func (p RetryPolicy) wait(attempt int) time.Duration {
	d := p.Backoff
	for i := 1; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	if d <= 0 {
		return 0
	}
	return d/2 + time.Duration(mrand.Int64N(int64(d/2)+1))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func cmpDuration(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
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
		r, err := e.c.ReplaceItem(ctx, pk, cur.ID, b, &azcosmos.ItemOptions{IfMatchEtag: &etag, EnableContentResponseOnWrite: true})
		if err == nil {
			next.ETag = r.ETag
			if written, derr := decodeState(r.Value); derr == nil {
				next.Updated = written.Updated
			}
			return next, nil
		}
		if ctx.Err() != nil {
			return cur, fmt.Errorf("%w: %v", ErrPreempted, ctx.Err())
		}
		if statusOf(err) != http.StatusPreconditionFailed && !transient(err) {
			return cur, fmt.Errorf("saga: recording %q: %w", cur.ID, err)
		}
		// Refused or ambiguous (a lost reply, a timeout, a 503: the write
		// may have applied): read the document to tell. Only the loss of
		// the lease (ctx) or a refusal that is not transient ends this.
		now, gerr := e.Get(ctx, cur.ID)
		if gerr != nil {
			if transient(gerr) && attempt < transitionAttempts {
				if serr := sleep(ctx, backoff(attempt)); serr != nil {
					return cur, fmt.Errorf("%w: %v", ErrPreempted, serr)
				}
				continue
			}
			return cur, fmt.Errorf("saga: recording %q: %w", cur.ID, gerr)
		}
		switch {
		case now.Rev == next.Rev && now.Writer == owner:
			return now, nil
		case now.Rev == cur.Rev && now.ETag == cur.ETag && attempt < transitionAttempts:
			// It did not apply: try again.
			if serr := sleep(ctx, backoff(attempt)); serr != nil {
				return cur, fmt.Errorf("%w: %v", ErrPreempted, serr)
			}
			continue
		case now.Rev == cur.Rev && now.ETag == cur.ETag:
			return cur, fmt.Errorf("saga: recording %q: %w", cur.ID, err)
		}
		return now, fmt.Errorf("%w: %q moved to revision %d by %s", ErrPreempted, cur.ID, now.Rev, now.Writer)
	}
}

// transitionAttempts bounds the tries of one write of the saga's state or
// of a read that settles one; with backoff up to a second between them,
// longer than any lease, whose loss ends the tries first.
const transitionAttempts = 40

// backoff is the wait after the attempt-th failed try of a database call:
// 20 ms doubling up to 1 s, with jitter.
func backoff(attempt int) time.Duration {
	return RetryPolicy{Backoff: 20 * time.Millisecond, MaxBackoff: time.Second}.wait(attempt + 1)
}

// transient reports whether a database call's failure may go away by
// trying again (see coord/internal/status).
func transient(err error) bool { return status.Transient(err) }

// retryTransient calls f until it succeeds, fails for good, or ctx ends,
// waiting with backoff between tries that failed transiently.
func retryTransient(ctx context.Context, f func() error) error {
	for attempt := 0; ; attempt++ {
		err := f()
		if err == nil || !transient(err) || attempt >= transitionAttempts || ctx.Err() != nil {
			return err
		}
		if serr := sleep(ctx, backoff(attempt)); serr != nil {
			return errors.Join(err, serr)
		}
	}
}

func statusOf(err error) int { return status.Of(err) }

// NewID returns a random saga id.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
