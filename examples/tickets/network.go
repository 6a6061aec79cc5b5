package main

// The "network faults" switch: Orrery injects, into the buyers' requests
// only, the failures a real network and a busy account produce: a write
// that commits and whose reply is lost, and 429 storms. The buyers talk to
// Cosmos through an SDK client of their own whose user agent carries
// buyerAgent, and the rules match that substring, so the app's own
// bookkeeping (seeding, the integrity check, the activity feed, the relay)
// is never faulted.
//
// The rules are installed through Orrery's admin API (/_admin/faults),
// signed with the account key as the SDKs sign their requests. Azure
// Cosmos DB has no such API: against it the switch says so and stays off.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/faults"
)

// buyerAgent is in the User-Agent of every buyer's request (the SDK's
// application id), and only there.
const buyerAgent = "cosmicticks-buyer"

// Network fault rule ids, as the admin API and its explorer page list them.
const (
	ruleLostReply = "cosmicticks-buyers-lost-reply"
	ruleStorm429  = "cosmicticks-buyers-429-storm"
)

// networkRules are the rules the switch installs: a buyer's write commits
// and its reply is lost (the connection reset) one time in four, and one
// request in three is refused with 429 whatever it is. The SDK retries a
// 429 after the retry-after it carries, three times, then gives it to the
// app; it gives a lost reply to the app at once.
func networkRules() []faults.Rule {
	return []faults.Rule{
		{
			ID: ruleLostReply,
			Condition: faults.Condition{UserAgent: buyerAgent,
				Operations: []string{"CreateItem", "UpsertItem", "ReplaceItem", "PatchItem", "BatchItem"}},
			Result:      faults.Result{Type: faults.AppliedThenLost, Lost: faults.LostReset},
			Probability: 0.25,
		},
		{
			ID:          ruleStorm429,
			Condition:   faults.Condition{UserAgent: buyerAgent},
			Result:      faults.Result{Type: faults.TooManyRequests, RetryAfter: faults.Duration(5 * time.Millisecond)},
			Probability: 0.3,
		},
	}
}

// clientOptions is the SDK's configuration for the app (agent "") or the
// buyers (buyerAgent).
func clientOptions(agent string) *azcosmos.ClientOptions {
	return &azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{
		Telemetry: policy.TelemetryOptions{ApplicationID: agent},
	}}
}

// readyClient returns an SDK client whose first request has been answered.
// Before its first request the SDK reads the account (its endpoint
// manager's bootstrap); when that read fails, it keeps the error for five
// minutes and fails every request of the client with it meanwhile, without
// sending them. A buyers' client whose first request met the network faults
// switch's 429 storm (four refusals in a row, the SDK's tries, one time in
// 120) would fail every purchase of every buyer until then: so the app makes
// its buyers' client ready at its start, before the switch can be turned
// on, and makes a new client when that first request is refused all the
// same (the rules of a switch left on by an earlier run of the app).
func readyClient(ctx context.Context, endpoint, key, agent string) (*azcosmos.Client, error) {
	for try := 1; ; try++ {
		c, err := newClient(endpoint, key, agent)
		if err != nil {
			return nil, err
		}
		db, err := c.NewDatabase(databaseName)
		if err != nil {
			return nil, err
		}
		// Any answer from the database itself says the bootstrap is done:
		// the database is made later, when this is the first start.
		_, err = db.Read(ctx, nil)
		if err == nil || isStatus(err, http.StatusNotFound) {
			return c, nil
		}
		if !isStatus(err, http.StatusTooManyRequests) || try == buyerAttempts || ctx.Err() != nil {
			return nil, err
		}
		pause(ctx, try)
	}
}

// faultAdmin installs and removes the switch's rules through Orrery's
// admin API.
type faultAdmin struct {
	endpoint string // with a trailing slash
	key      []byte
	http     *http.Client
	mu       sync.Mutex // one change at a time
}

// newFaultAdmin returns the admin API's client for an endpoint and key.
func newFaultAdmin(endpoint, key string) (*faultAdmin, error) {
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		return nil, fmt.Errorf("the key is not base64: %v", err)
	}
	return &faultAdmin{endpoint: strings.TrimSuffix(endpoint, "/") + "/", key: k, http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// errNoFaultAPI is an endpoint without Orrery's fault rules (Azure).
var errNoFaultAPI = errors.New("this endpoint has no fault rules (/_admin/faults): network faults need Orrery, as the app starts it without --endpoint")

// call sends one signed request to /_admin/faults[/id] and decodes a JSON
// answer into out (when not nil).
func (f *faultAdmin) call(ctx context.Context, method, id string, body, out any) (int, error) {
	path, link := "_admin/faults", ""
	if id != "" {
		path += "/" + url.PathEscape(id)
		link = "faults/" + id
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.endpoint+path, rd)
	if err != nil {
		return 0, err
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	mac := hmac.New(sha256.New, f.key)
	fmt.Fprintf(mac, "%s\n%s\n%s\n%s\n\n", strings.ToLower(method), "faults", link, strings.ToLower(date))
	req.Header.Set("Authorization", url.QueryEscape("type=master&ver=1.0&sig="+base64.StdEncoding.EncodeToString(mac.Sum(nil))))
	req.Header.Set("x-ms-date", date)
	req.Header.Set("x-ms-version", "2020-07-15")
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		var e struct{ Code, Message string }
		if json.Unmarshal(b, &e) != nil || e.Message == "" {
			return resp.StatusCode, errNoFaultAPI
		}
		return resp.StatusCode, fmt.Errorf("%d %s: %s", resp.StatusCode, e.Code, e.Message)
	}
	if out != nil {
		return resp.StatusCode, json.Unmarshal(b, out)
	}
	return resp.StatusCode, nil
}

// set installs the switch's rules (on) or removes them (off). Turning it on
// twice replaces the rules, their hits counted afresh.
func (f *faultAdmin) set(ctx context.Context, on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range networkRules() {
		if status, err := f.call(ctx, http.MethodDelete, r.ID, nil, nil); err != nil && status != http.StatusNotFound {
			return err
		}
	}
	if !on {
		return nil
	}
	_, err := f.call(ctx, http.MethodPost, "", map[string]any{"rules": networkRules()}, nil)
	return err
}

// hits returns the hits of the switch's rules that are installed, by id.
func (f *faultAdmin) hits(ctx context.Context) (map[string]int64, error) {
	var list struct {
		Rules []faults.Status `json:"rules"`
	}
	if _, err := f.call(ctx, http.MethodGet, "", nil, &list); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, r := range list.Rules {
		if r.ID == ruleLostReply || r.ID == ruleStorm429 {
			out[r.ID] = r.Hits
		}
	}
	return out, nil
}

// How a buyer's write may have ended, from the error it got.
type writeFate int

const (
	// fateRefused: the database answered and the write did not apply (a
	// 412, a 409, a rolled-back batch): the answer is the truth.
	fateRefused writeFate = iota
	// fateNotApplied: the database refused it before applying it (429,
	// 449, 410): the same write may be sent again.
	fateNotApplied
	// fateUnknown: no answer, or one that does not say (a reset
	// connection, 408, 500, 503): the write may have committed. Sending it
	// again blindly is the bug; reading back what it would have changed
	// tells.
	fateUnknown
)

// fateOf classifies a write's error (not nil).
func fateOf(err error) writeFate {
	if batchStatus(err) != 0 {
		return fateRefused
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		switch re.StatusCode {
		case http.StatusTooManyRequests, 449, http.StatusGone:
			return fateNotApplied
		case http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusServiceUnavailable:
			return fateUnknown
		}
		return fateRefused
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fateRefused // the buyer gave up: nothing more to learn
	}
	return fateUnknown // a transport error: the reply was lost
}

// buyerAttempts bounds how often a buyer sends one purchase (or reads one
// document) before it gives up and is told so.
const buyerAttempts = 10

// pause is the wait before a buyer's next attempt: the 429's retry-after
// has been waited by the SDK already, this spreads the retries.
func pause(ctx context.Context, attempt int) {
	t := time.NewTimer(time.Duration(attempt) * 5 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// readRetrying is a buyer's point read, sent again while the answer is
// not a 2xx or a 404: reads change nothing, so retrying them is safe.
func readRetrying(ctx context.Context, c *azcosmos.ContainerClient, pk, id string) (azcosmos.ItemResponse, error) {
	var last error
	for i := range buyerAttempts {
		resp, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString(pk), id, nil)
		if err == nil || isStatus(err, http.StatusNotFound) || ctx.Err() != nil {
			return resp, err
		}
		last = err
		pause(ctx, i+1)
	}
	return azcosmos.ItemResponse{}, last
}
