package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/orrery-db/orrery/engine/script"
	"github.com/orrery-db/orrery/query"
	"github.com/orrery-db/orrery/storage"
)

// Error is the one error type the engine returns for anything a client did or
// asked for. Status is the HTTP status Cosmos answers with, SubStatus its
// substatus (0 when none) and Code the Cosmos error code string.
type Error struct {
	Status    int
	SubStatus int
	Code      string
	Message   string
	// AdditionalErrorInfo, when set, is the JSON text the service puts in the
	// error body's additionalErrorInfo: for a cross-partition query its
	// gateway refuses (substatus 1004), the query plan the client should
	// execute instead.
	AdditionalErrorInfo string
	// SessionLSN, when not 0, is the session token's LSN, read with the
	// failed operation's own work (a point read's 404 on a shared store).
	SessionLSN uint64
}

// Error implements the error interface.
func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Cosmos substatus codes the engine emits.
const (
	// SubStatusPartitionKeyMismatch: the partition key in the header differs from the document's.
	SubStatusPartitionKeyMismatch = 1001
	// SubStatusOwnerResourceNotFound: the database or container of the request does not exist.
	SubStatusOwnerResourceNotFound = 1003
	// SubStatusCrossPartitionQuery: a cross-partition query the gateway cannot serve directly.
	SubStatusCrossPartitionQuery = 1004
)

// Canonical messages, as the service words them.
const (
	msgNotFound = "Entity with the specified id does not exist in the system."
	msgConflict = "Entity with the specified id already exists in the system."
	// msgPrecondition has no final period: the emulator's message has none.
	msgPrecondition = "One of the specified pre-condition is not met"
	msgETagMismatch = "E-tag mismatch detected"
	// msgEntityTooLarge is the service's 413 message in its gateway's
	// format (the SDKs' suites look for it whole); a detail of Orrery's
	// follows on the next line.
	msgEntityTooLarge = `Message: {"Errors":["Request size is too large"]}`
)

func errorf(status int, code string, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// BadRequest returns a 400 error with the given message.
func BadRequest(format string, args ...any) *Error {
	return errorf(400, "BadRequest", format, args...)
}

// NotFound returns a 404 error.
func NotFound(format string, args ...any) *Error {
	return errorf(404, "NotFound", format, args...)
}

// Conflict returns a 409 error.
func Conflict(format string, args ...any) *Error {
	return errorf(409, "Conflict", format, args...)
}

// PreconditionFailed returns a 412 error.
func PreconditionFailed(format string, args ...any) *Error {
	return errorf(412, "PreconditionFailed", format, args...)
}

// TooLarge returns a 413 error.
func TooLarge(format string, args ...any) *Error {
	return errorf(413, "RequestEntityTooLarge", format, args...)
}

// Forbidden returns a 403 error.
func Forbidden(format string, args ...any) *Error {
	return errorf(403, "Forbidden", format, args...)
}

// AsError returns err as an *Error when it is one (or wraps one), and a
// 503 ServiceUnavailable when storage has failed (storage.ErrUnavailable),
// a 408 RequestTimeout when the request's context ended: what a client is
// told of err. Anything else is an internal error.
func AsError(err error) (*Error, bool) {
	if err == nil {
		// No error is none of them (and errors.As would move e to the
		// heap for nothing: the server asks on every query page).
		return nil, false
	}
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	if errors.Is(err, storage.ErrExists) {
		// A key the write declared new existed in storage (a write it
		// raced with, or an entry left behind): nothing was written.
		return errorf(409, "Conflict", "The write conflicted with the stored data: a key it wrote as new exists. Nothing was written; retry the request."), true
	}
	if errors.Is(err, storage.ErrUnavailable) {
		return errorf(503, "ServiceUnavailable", "The service is unavailable: its storage has failed or cannot be reached; retry later."), true
	}
	// The request's context ended (the client went away or gave up): not
	// the server's fault, and nobody may be left to read the answer.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errorf(408, "RequestTimeout", "The request was cancelled before it completed."), true
	}
	return nil, false
}

// StatusOf returns the Cosmos status an error answers with: the *Error's
// status, or 500 for anything else.
func StatusOf(err error) int {
	if e, ok := AsError(err); ok {
		return e.Status
	}
	return 500
}

// parseQuery parses a query, mapping syntax errors to 400.
func parseQuery(text string) (*query.Query, error) {
	q, err := query.Parse(text)
	if err != nil {
		return nil, parseError(err)
	}
	return q, nil
}

// parseError is a query's syntax error as the 400 the service answers.
func parseError(err error) error {
	var qe *query.Error
	if errors.As(err, &qe) {
		return BadRequest("%s", qe.Error())
	}
	return BadRequest("%v", err)
}

// queryError maps an execution error: an invalid query or one that needs
// more memory than a query may hold to 400, a query that could not make
// progress within its time budget or whose request was cancelled to 408,
// a query refused for want of the memory all queries share to 429. A
// storage failure stays as it is.
func queryError(err error) error {
	var qe *query.Error
	switch {
	case errors.As(err, &qe):
		return BadRequest("%s", qe.Error())
	case errors.Is(err, query.ErrTimeBudget):
		return &Error{Status: 408, Code: "RequestTimeout", Message: msgQueryTimeBudget}
	case errors.Is(err, query.ErrMemoryPool):
		return &Error{Status: 429, Code: "TooManyRequests", Message: msgQueryMemoryPool}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: 408, Code: "RequestTimeout", Message: "The request was cancelled while its query ran."}
	}
	return err
}

const (
	msgQueryTimeBudget = "Request timed out: the query used up the time budget of one page without producing a result. " +
		"Queries evaluated whole (ORDER BY, aggregates, GROUP BY, DISTINCT) must finish within one page's budget, " +
		"and so must each row of a query; add filters, use fewer JOINs, or scope the query to a partition key."
	msgQueryMemoryPool = "Request rate is large: the memory that running queries share is in use. Retry the query later."
)

// scriptErrorCodes names, as the service does in an error body's code, the
// statuses a script run can end with (script.Status*).
var scriptErrorCodes = map[int]string{
	script.StatusBadRequest:            "BadRequest",
	script.StatusForbidden:             "Forbidden",
	script.StatusNotFound:              "NotFound",
	script.StatusRequestTimeout:        "RequestTimeout",
	script.StatusConflict:              "Conflict",
	script.StatusPreconditionFailed:    "PreconditionFailed",
	script.StatusRequestEntityTooLarge: "RequestEntityTooLarge",
	script.StatusRetryWith:             "RetryWith",
	401:                                "Unauthorized",
	429:                                "TooManyRequests",
	503:                                "ServiceUnavailable",
	script.StatusInternalServerError:   "InternalServerError",
}

// scriptError maps an error a script run returned to the engine's error.
func scriptError(err error) error {
	var se *script.Error
	if errors.As(err, &se) {
		code, ok := scriptErrorCodes[se.Status]
		if !ok {
			code = "InternalServerError"
		}
		return &Error{Status: se.Status, Code: code, Message: se.Message}
	}
	return err
}
