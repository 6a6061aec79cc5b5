package script

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Status codes a script can see in err.number, named as in the server-side
// ErrorCodes object.
const (
	StatusBadRequest            = 400
	StatusForbidden             = 403
	StatusNotFound              = 404
	StatusRequestTimeout        = 408
	StatusConflict              = 409
	StatusPreconditionFailed    = 412
	StatusRequestEntityTooLarge = 413
	StatusTooManyRequests       = 429
	StatusRetryWith             = 449
	StatusInternalServerError   = 500
)

// StatusCoder is implemented by errors that carry an HTTP status. The engine's
// errors returned from Collection methods should implement it; their Error()
// text becomes the script's err.body. An error that does not implement it is
// seen by the script as 500 InternalServerError.
type StatusCoder interface {
	error
	StatusCode() int
}

// Error is the error this package returns: the HTTP status the request should
// answer with and the Cosmos-style message.
type Error struct {
	Status  int
	Message string
	// Stopped names the limit the run was stopped at, empty when it ended
	// by itself (returned or threw): StopTimeout, StopMemory, StopQuantum or
	// StopCancelled.
	Stopped string
}

// Why a run was stopped (Error.Stopped).
const (
	StopTimeout   = "timeout"   // its time budget was spent
	StopMemory    = "memory"    // its own memory limit, or that of all runs together
	StopQuantum   = "quantum"   // it outran the short slot it was admitted to
	StopCancelled = "cancelled" // the request was cancelled
)

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// StatusCode returns the HTTP status.
func (e *Error) StatusCode() int { return e.Status }

// knownStatuses are the statuses a script may throw (as err.number) and have
// the request answer with; any other number answers 400.
var knownStatuses = map[int]bool{
	400: true, 401: true, 403: true, 404: true, 408: true, 409: true, 412: true,
	413: true, 429: true, 449: true, 500: true, 503: true,
}

// scriptFailure formats an exception that escaped the script the way Cosmos
// reports it: Message: {"Errors":["Encountered exception while executing
// function. Exception = <text>"]}.
func scriptFailure(status int, exception string) *Error {
	return failure(status, "Encountered exception while executing function. Exception = "+exception)
}

// failure wraps one error text into the Cosmos message envelope.
func failure(status int, text string) *Error {
	b, _ := json.Marshal(struct {
		Errors []string `json:"Errors"`
	}{[]string{text}})
	return &Error{Status: status, Message: "Message: " + string(b)}
}

// statusOf returns the status of an error from the Collection (500 when it
// carries none) and its text.
func statusOf(err error) (int, string) {
	var sc StatusCoder
	if errors.As(err, &sc) {
		return sc.StatusCode(), sc.Error()
	}
	return StatusInternalServerError, err.Error()
}

// limitError is the value a run is interrupted with when it breaks a limit.
type limitError struct {
	status int
	text   string
	cause  string // Error.Stopped
}

// failure returns the error a run stopped at this limit answers with.
func (e *limitError) failure() *Error {
	f := failure(e.status, e.text)
	f.Stopped = e.cause
	return f
}

func (e *limitError) Error() string { return e.text }

func newTimeoutError(budget fmt.Stringer) *limitError {
	return &limitError{StatusRequestTimeout, "The script exceeded its time budget of " + budget.String() + " and was stopped.", StopTimeout}
}

func newMemoryError(limit int64) *limitError {
	return &limitError{StatusBadRequest, fmt.Sprintf("The script exceeded its memory limit of %d bytes and was stopped.", limit), StopMemory}
}

func newQuantumError(quantum fmt.Stringer) *limitError {
	return &limitError{StatusTooManyRequests, "The script ran longer than " + quantum.String() +
		" in a slot kept for short scripts while the others were taken, and was stopped. Retry later: it will wait for a slot of its own.", StopQuantum}
}

func newTotalMemoryError(budget int64) *limitError {
	return &limitError{StatusBadRequest, fmt.Sprintf("The script was stopped at the memory limit of all scripts running together: they grew the heap beyond %d bytes, and it had run the longest of them.", budget), StopMemory}
}
