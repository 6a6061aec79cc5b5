package changefeed

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// LeaseLag is the work remaining on one lease.
type LeaseLag struct {
	LeaseToken string
	Owner      string
	// Lag is the number of changes the lease's owner has yet to deliver.
	Lag int64
}

// Estimator reports how much of the feed a processor has yet to deliver. It
// reads each lease's range from its checkpoint to the end, counting the
// changes without writing anything, so the figure is exact at the time of
// the read (the changes a processor would deliver next) and costs a read of
// the backlog. The .NET estimator's LSN difference is cheaper but counts
// every write, also those of other ranges and superseded versions.
type Estimator struct {
	monitored *azcosmos.ContainerClient
	leases    *azcosmos.ContainerClient
	name      string
	host      string
	st        *store
	rid       string
	from      StartFrom
}

// NewEstimator returns an estimator for the processor with opts.Name (and
// opts.Host, opts.StartFrom) over monitored, whose leases are in leases.
func NewEstimator(monitored, leases *azcosmos.ContainerClient, opts Options) *Estimator {
	return &Estimator{monitored: monitored, leases: leases, name: opts.Name, host: opts.Host, from: opts.StartFrom}
}

func (e *Estimator) init(ctx context.Context) error {
	if e.st != nil {
		return nil
	}
	props, err := e.monitored.Read(ctx, nil)
	if err != nil {
		return fmt.Errorf("changefeed: reading the monitored container: %w", err)
	}
	e.rid = props.ContainerProperties.ResourceID
	e.st = &store{c: e.leases, prefix: leasePrefix(e.name, e.host, e.rid)}
	return nil
}

// Estimate returns the lag of every lease.
func (e *Estimator) Estimate(ctx context.Context) ([]LeaseLag, error) {
	if err := e.init(ctx); err != nil {
		return nil, err
	}
	all, err := e.st.list(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]LeaseLag, 0, len(all))
	for _, l := range all {
		n, err := e.leaseLag(ctx, l)
		if err != nil {
			return nil, err
		}
		out = append(out, LeaseLag{LeaseToken: l.LeaseToken, Owner: l.Owner, Lag: n})
	}
	return out, nil
}

// Total returns the sum of the leases' lags.
func (e *Estimator) Total(ctx context.Context) (int64, error) {
	lags, err := e.Estimate(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range lags {
		n += l.Lag
	}
	return n, nil
}

// leaseLag counts the changes after the lease's checkpoint.
func (e *Estimator) leaseLag(ctx context.Context, l *Lease) (int64, error) {
	r, ok := l.Range()
	if !ok {
		return 0, nil
	}
	opts := feedOptions(e.rid, r, l.ContinuationToken, e.from, 1000)
	var n int64
	for {
		resp, err := e.monitored.ReadChangeFeed(ctx, opts)
		if err != nil {
			return 0, fmt.Errorf("changefeed: estimating lease %s: %w", l.LeaseToken, err)
		}
		if len(resp.Items) == 0 {
			return n, nil
		}
		n += int64(len(resp.Items))
		t := resp.ContinuationToken
		opts = &azcosmos.ChangeFeedOptions{MaxItemCount: 1000, Continuation: &t}
	}
}
