// Package status classifies the errors of Cosmos DB calls for coord's
// packages: their status, and whether trying again may succeed.
package status

import (
	"context"
	"errors"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
)

// Of is the HTTP status of a Cosmos DB response error, 0 for any other
// error (a transport failure, a cancelled context). A 404 with substatus
// 1002 is no "not found": the replica has not caught up with the session
// yet (the SDK retries it itself, but may give up); it is reported as 503,
// a transient failure, so that nobody concludes from it that a document is
// absent.
func Of(err error) int {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return 0
	}
	if re.StatusCode == http.StatusNotFound && re.RawResponse != nil && re.RawResponse.Header.Get("x-ms-substatus") == "1002" {
		return http.StatusServiceUnavailable
	}
	return re.StatusCode
}

// Transient reports whether a call's failure may go away by trying again:
// the service was busy (429, 449), timed out or unavailable (408, 5xx), a
// partition was moving (410: a split or migration completing), or the
// transport failed, when the outcome of a write is unknown. A cancelled or
// expired context is not transient.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	switch s := Of(err); {
	case s == 0:
		return true
	case s == http.StatusRequestTimeout, s == http.StatusGone, s == http.StatusTooManyRequests, s == 449, s >= 500:
		return true
	}
	return false
}
