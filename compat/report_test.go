package compat

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// firstLine renders an SDK error the way the seeds' Python scripts print
// one: "412 (PreconditionFailed) One of the specified pre-condition is not
// met", the status, the error code and the first line of the message.
func firstLine(t *testing.T, err error) string {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("not a response error: %v", err)
	}
	body, perr := runtime.Payload(re.RawResponse)
	if perr != nil {
		t.Fatalf("reading the error body: %v", perr)
	}
	var e struct{ Code, Message string }
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q is not a Cosmos error: %v", body, err)
	}
	msg, _, _ := strings.Cut(strings.ReplaceAll(e.Message, "\r\n", "\n"), "\n")
	return fmt.Sprintf("%d (%s) %s", re.StatusCode, e.Code, msg)
}

// statusCodes lists the operation statuses of a batch response.
func statusCodes(resp azcosmos.TransactionalBatchResponse) []int {
	codes := make([]int, len(resp.OperationResults))
	for i, r := range resp.OperationResults {
		codes[i] = int(r.StatusCode)
	}
	return codes
}

// batchError renders a failed batch as the seeds' batch_error does:
// "409, error_index 2, [424, 424, 409]", the failing operation's status, its
// index (the first status that is not 424) and every status.
func batchError(resp azcosmos.TransactionalBatchResponse) string {
	codes := statusCodes(resp)
	index := -1
	for i, c := range codes {
		if c != http.StatusFailedDependency {
			index = i
			break
		}
	}
	status := 0
	if index >= 0 {
		status = codes[index]
	}
	return fmt.Sprintf("%d, error_index %d, %s", status, index, pyList(codes))
}

// pyList prints ints as Python prints a list: [424, 400].
func pyList[T any](v []T) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprint(x)
		if s, ok := any(x).(string); ok {
			parts[i] = "'" + s + "'"
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// expectLines compares printed lines with a seed's terminal output.
func expectLines(t *testing.T, got []string, want ...string) {
	t.Helper()
	for _, l := range got {
		t.Log(l)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("printed:\n%s\nseed shows:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func azcosmosETag(s string) azcore.ETag { return azcore.ETag(s) }
