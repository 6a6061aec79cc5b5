package compat

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

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

func azcosmosETag(s string) azcore.ETag { return azcore.ETag(s) }
