package transfer

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// PartitionKeyPolicy returns the client policy that lets Import and Seed
// write items without a partition key property. The service takes such an
// item into the undefined partition key, which the JavaScript, Python, .NET
// and Java SDKs send as {} in x-ms-documentdb-partitionkey ([{}] for a
// single path); the Go SDK has no way to say it. Put the policy in the
// client's azcosmos.ClientOptions PerCallPolicies: it sets the header on
// the requests Import marks and leaves every other request alone. Without
// it, Import counts such items as failed, saying so.
func PartitionKeyPolicy() policy.Policy { return partitionKeyPolicy{} }

type partitionKeyPolicy struct{}

// headerMark is what Import puts in a request's context for the policy.
type headerMark struct {
	// value, when set, replaces the partition key header.
	value string
	// seen is set by the policy: it is in the client's pipeline.
	seen atomic.Bool
}

type headerMarkKey struct{}

func (partitionKeyPolicy) Do(req *policy.Request) (*http.Response, error) {
	if m, ok := req.Raw().Context().Value(headerMarkKey{}).(*headerMark); ok {
		m.seen.Store(true)
		if m.value != "" {
			req.Raw().Header.Set("x-ms-documentdb-partitionkey", m.value)
		}
	}
	return req.Next()
}

// withPartitionKeyHeader marks ctx for the policy to send header as the
// request's partition key.
func withPartitionKeyHeader(ctx context.Context, header string) context.Context {
	return context.WithValue(ctx, headerMarkKey{}, &headerMark{value: header})
}

// probePolicy returns a context whose request tells, by seen, whether the
// client has the policy.
func probePolicy(ctx context.Context) (context.Context, *headerMark) {
	m := &headerMark{}
	return context.WithValue(ctx, headerMarkKey{}, m), m
}
