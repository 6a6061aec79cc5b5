package status

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
)

func responseError(code int, sub string) error {
	h := http.Header{}
	if sub != "" {
		h.Set("x-ms-substatus", sub)
	}
	return fmt.Errorf("wrapped: %w", &azcore.ResponseError{StatusCode: code, RawResponse: &http.Response{StatusCode: code, Header: h}})
}

func TestReadSessionNotAvailableIsNoNotFound(t *testing.T) {
	if got := Of(responseError(404, "")); got != 404 {
		t.Fatalf("404: %d", got)
	}
	if got := Of(responseError(404, "1002")); got != 503 {
		t.Fatalf("404/1002: %d, want 503", got)
	}
	if !Transient(responseError(404, "1002")) || Transient(responseError(404, "")) {
		t.Fatal("404/1002 must be transient, 404 not")
	}
}

func TestTransientStatuses(t *testing.T) {
	for code, want := range map[int]bool{400: false, 403: false, 409: false, 412: false, 413: false,
		408: true, 410: true, 429: true, 449: true, 500: true, 503: true} {
		if got := Transient(responseError(code, "")); got != want {
			t.Errorf("%d: transient %v, want %v", code, got, want)
		}
	}
	if !Transient(errors.New("connection reset")) {
		t.Error("a transport error must be transient")
	}
	if Transient(context.Canceled) || Transient(fmt.Errorf("x: %w", context.DeadlineExceeded)) || Transient(nil) {
		t.Error("context errors and nil are not transient")
	}
}
