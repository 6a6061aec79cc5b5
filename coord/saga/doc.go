// Package saga runs multi-step workflows across partitions or services (a
// purchase that holds a seat, charges a card, issues a ticket and sends a
// confirmation) where no transaction spans the steps: each step is an
// action paired with a compensation, and a failure undoes the steps already
// done, in reverse order. It is built on the azcosmos SDK, coord and
// coord/lock, and must not import the other coord packages nor anything of
// the Orrery server.
//
// A saga instance is one document holding its state: the next step, each
// completed step with the output its action returned, and, once an action
// failed, the list of steps still to compensate — written before any
// compensation runs, so a crash in the middle of compensating resumes
// compensating. Every transition is a write conditional on the document's
// ETag, so two executors can never both advance one saga; and an executor
// drives a saga only while it holds the saga's lease (coord/lock), so
// recoverers racing to resume a crashed saga take turns and exactly one
// drives it. After a crash, Resume continues from the recorded state instead
// of replaying blindly.
//
// # Outputs
//
// An action returns an output (a charge id, a reservation number), which is
// recorded as JSON with the step's completion, in the same write. Every
// later action, and every compensation, sees the outputs of the steps
// completed so far (Call.Output), also after a crash and in another
// process: the refund knows the charge it refunds.
//
// # Retries and timeouts
//
// Each attempt of an action or a compensation may be bounded by a timeout
// (Step.Timeout, Step.CompensationTimeout, or the executor's defaults), and
// a failed attempt is retried with exponential backoff under a RetryPolicy
// (Step.Retry, Step.CompensationRetry, or the executor's). An action that
// returns an error wrapped with Permanent (a declined card) is not retried:
// the saga compensates at once. An action whose attempts are spent fails
// the saga; a compensation whose attempts are spent leaves it in
// compensation_failed, visible in Unfinished, until Resume tries again.
//
// # Idempotency
//
// Actions and compensations are called with an idempotency key (the saga id
// and the step name) that stays the same across attempts, retries and
// executors: the participant must apply each key at most once, and a
// compensation must be safe when its action never took effect (it then
// records that the key is cancelled, so a late action with that key is
// refused). The step whose action failed is compensated too, since a failed
// call (a timeout above all) may still have taken effect; its compensation
// sees Call.Completed false and no output of its own.
package saga
