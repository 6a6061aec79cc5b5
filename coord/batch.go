package coord

import (
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// BatchError is a transactional batch that did not commit: the database
// rolled it back, so none of its operations took effect. Every package of
// coord reports such a batch with this error (errors.As).
type BatchError struct {
	// Index is the operation that failed (its position in the batch), or -1
	// when the response named none.
	Index int
	// StatusCode is that operation's status: 409 for an id that exists, 412
	// for a stale ETag or a false patch condition, 404 for a missing item.
	StatusCode int32
}

// Error says which operation failed and how.
func (e *BatchError) Error() string {
	if e.Index < 0 {
		return "the transactional batch did not commit"
	}
	return fmt.Sprintf("the transactional batch did not commit: operation %d failed with status %d", e.Index, e.StatusCode)
}

// Committed turns the results of ExecuteTransactionalBatch into one error:
// nil when the batch committed, a *BatchError when the database rolled it
// back (nothing of it was written), or the request's own error (the outcome
// is then unknown: the batch may have committed).
func Committed(resp azcosmos.TransactionalBatchResponse, err error) error {
	if err != nil {
		return err
	}
	if resp.Success {
		return nil
	}
	return NewBatchError(resp)
}

// NewBatchError returns the *BatchError of a batch response that did not
// commit, naming its first operation whose status is a failure of its own
// (not 424, failed dependency).
func NewBatchError(resp azcosmos.TransactionalBatchResponse) *BatchError {
	for i, r := range resp.OperationResults {
		if r.StatusCode >= 300 && r.StatusCode != http.StatusFailedDependency {
			return &BatchError{Index: i, StatusCode: r.StatusCode}
		}
	}
	return &BatchError{Index: -1}
}
