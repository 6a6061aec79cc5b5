package changefeed

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// LeaseLag is the work remaining on one lease.
type LeaseLag struct {
	// LeaseToken names the lease; Owner is the instance holding it ("" when
	// none does).
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
	p *Processor
}

// NewEstimator returns an estimator for the processor with that name over
// monitored, whose leases are in leases, without running one (from a
// monitoring process, say). client and opts are as for New; of opts, Host,
// Mode and StartFrom matter.
func NewEstimator(client *azcosmos.Client, monitored, leases *azcosmos.ContainerClient, name string, opts *Options) (*Estimator, error) {
	p, err := newProcessor(client, monitored, leases, name, opts)
	if err != nil {
		return nil, err
	}
	return &Estimator{p: p}, nil
}

// Estimate returns the lag of every lease.
func (e *Estimator) Estimate(ctx context.Context) ([]LeaseLag, error) {
	if err := e.p.open(ctx); err != nil {
		return nil, err
	}
	all, err := e.p.st.list(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]LeaseLag, 0, len(all))
	for _, l := range all {
		n, err := leaseLag(ctx, e.p.feed, l)
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
func leaseLag(ctx context.Context, f *feed, l *Lease) (int64, error) {
	r, ok := l.Range()
	if !ok {
		return 0, nil
	}
	opts := f.options(r, l.ContinuationToken, 1000)
	var n int64
	for {
		resp, err := f.monitored.ReadChangeFeed(f.ctx(ctx), opts)
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
