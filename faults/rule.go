package faults

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Rule is one fault to inject: when a request meets Condition, within the
// rule's limits, the server answers it with Result instead of (or besides)
// serving it.
type Rule struct {
	// ID names the rule; Add makes one up when it is empty. Ids are unique.
	ID        string    `json:"id"`
	Condition Condition `json:"condition"`
	Result    Result    `json:"result"`
	// Times is how many requests the rule fires for at most (the SDKs'
	// hit limit); 0 for no limit.
	Times int64 `json:"times,omitempty"`
	// Probability is the chance that a matching request is faulted, from
	// 0 (exclusive) to 1; 0 means 1. A request it spares is not a hit.
	Probability float64 `json:"probability,omitempty"`
	// Start and End bound when the rule fires: from Start (inclusive) to
	// End (exclusive); zero for no bound.
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
	// StartAfter and For set Start and End relative to when the rule is
	// added (the SDKs' startDelay and duration); Add turns them into Start
	// and End.
	StartAfter Duration `json:"startAfter,omitempty"`
	For        Duration `json:"for,omitempty"`
}

// Condition is what a request must be for a rule to fire. Every field set
// must hold; an empty Condition holds for every request.
type Condition struct {
	// Operations are the operation kinds the rule applies to, as the SDKs'
	// fault-injection libraries name them (ReadItem, CreateItem, QueryItem,
	// BatchItem, ChangeFeedItem, MetadataPartitionKeyRanges...; Java's
	// READ_ITEM spelling too), or Orrery's own operation names
	// ("docs.read", "sprocs.execute"). Empty: every operation.
	Operations []string `json:"operations,omitempty"`
	// Database and Container are ids (or RIDs) as the request's path names them.
	Database  string `json:"database,omitempty"`
	Container string `json:"container,omitempty"`
	// PartitionKey is the logical partition, as the x-ms-documentdb-
	// partitionkey header carries it: a JSON array (["alice"]).
	PartitionKey json.RawMessage `json:"partitionKey,omitempty"`
	// PartitionKeyRangeID is a physical partition key range of the
	// container: the one a request names, or the one its partition key
	// falls in.
	PartitionKeyRangeID string `json:"partitionKeyRangeId,omitempty"`
	// ClientIP is the client's address, or a network in CIDR notation.
	ClientIP string `json:"clientIp,omitempty"`
	// UserAgent is a substring of the request's User-Agent header
	// (case-insensitive): "azsdk-go", "azsdk-js", "azsdk-python".
	UserAgent string `json:"userAgent,omitempty"`
	// User is the id of the user whose resource token signed the request.
	User string `json:"user,omitempty"`
}

// Result is what a rule does to a request it fires for.
type Result struct {
	// Type is the kind of fault: one of the Type constants.
	Type Type `json:"type"`
	// Delay is waited before the result (for ResponseDelay, the delay
	// itself before the request is served as usual).
	Delay Duration `json:"delay,omitempty"`
	// RetryAfter is the x-ms-retry-after-ms a TooManyRequests answer
	// carries; 100 ms when 0.
	RetryAfter Duration `json:"retryAfter,omitempty"`
	// Lost is how a reply is lost for AppliedThenLost and LostBeforeApply:
	// LostReset (the connection is reset, the default), LostTimeout (408)
	// or LostServiceUnavailable (503).
	Lost string `json:"lost,omitempty"`
}

// Type is a kind of fault. The names are those of the SDKs'
// fault-injection libraries where they have one.
type Type string

// The kinds of fault.
const (
	// TooManyRequests: 429 with substatus 3200 and x-ms-retry-after-ms.
	TooManyRequests Type = "TooManyRequests"
	// Timeout: 408 RequestTimeout, the operation not applied.
	Timeout Type = "Timeout"
	// ServiceUnavailable: 503, the operation not applied.
	ServiceUnavailable Type = "ServiceUnavailable"
	// InternalServerError: 500, the operation not applied.
	InternalServerError Type = "InternalServerError"
	// RetryWith: 449, the operation not applied.
	RetryWith Type = "RetryWith"
	// PartitionIsGone: the partition key range the request reaches is
	// really split in two (as the admin split call does), then the request
	// is served as the service's gateway serves it after a split: routed
	// by its partition key to the child that holds it, or, when it is
	// scoped to the range split (a query, feed or change-feed page of one
	// range), answered 410 with substatus 1002, so that the SDK reads the
	// partition key ranges again and resumes on the children.
	PartitionIsGone Type = "PartitionIsGone"
	// PartitionIsSplitting: 410 with substatus 1007 (completing split).
	PartitionIsSplitting Type = "PartitionIsSplitting"
	// PartitionIsMigrating: 410 with substatus 1008 (completing
	// partition migration).
	PartitionIsMigrating Type = "PartitionIsMigrating"
	// ReadSessionNotAvailable: 404 with substatus 1002.
	ReadSessionNotAvailable Type = "ReadSessionNotAvailable"
	// ResponseDelay: the request is served as usual after Result.Delay.
	ResponseDelay Type = "ResponseDelay"
	// ConnectionReset: the connection is reset before the request's body
	// is read; nothing is applied.
	ConnectionReset Type = "ConnectionReset"
	// AppliedThenLost: the operation runs (and commits, if it writes),
	// then its reply is lost as Result.Lost says.
	AppliedThenLost Type = "AppliedThenLost"
	// LostBeforeApply: the request is read whole, nothing is applied, and
	// the reply is lost as Result.Lost says.
	LostBeforeApply Type = "LostBeforeApply"
)

// How a reply is lost (Result.Lost).
const (
	LostReset              = "reset"
	LostTimeout            = "Timeout"
	LostServiceUnavailable = "ServiceUnavailable"
)

// types lists the kinds with the other names the SDKs' libraries give them
// (compared with normalize).
var types = []struct {
	t       Type
	aliases []string
}{
	{TooManyRequests, []string{"TOO_MANY_REQUEST", "SERVER_TOO_MANY_REQUEST", "429"}},
	{Timeout, []string{"SERVER_TIMEOUT", "RequestTimeout", "408"}},
	{ServiceUnavailable, []string{"SERVER_SERVICE_UNAVAILABLE", "503"}},
	{InternalServerError, []string{"InternalServerEror", "500"}},
	{RetryWith, []string{"SERVER_RETRY_WITH", "449"}},
	{PartitionIsGone, []string{"GONE", "SERVER_GONE", "PartitionKeyRangeGone", "Split"}},
	{PartitionIsSplitting, []string{"PARTITION_IS_SPLITTING", "CompletingSplit"}},
	{PartitionIsMigrating, []string{"PARTITION_IS_MIGRATING", "CompletingPartitionMigration"}},
	{ReadSessionNotAvailable, []string{"READ_SESSION_NOT_AVAILABLE"}},
	{ResponseDelay, []string{"SERVER_RESPONSE_DELAY", "Delay"}},
	{ConnectionReset, []string{"CONNECTION_RESET", "CONNECTION_CLOSE", "ConnectionClose", "ConnectionError"}},
	{AppliedThenLost, []string{"ResponseTimeoutAfterService"}},
	{LostBeforeApply, []string{"ResponseTimeout"}},
}

// normalize folds a name for comparison: case and underscores do not count.
func normalize(s string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), "_", ""))
}

// ParseType reads a kind of fault by any of its names.
func ParseType(s string) (Type, error) {
	n := normalize(s)
	for _, t := range types {
		if normalize(string(t.t)) == n {
			return t.t, nil
		}
		for _, a := range t.aliases {
			if normalize(a) == n {
				return t.t, nil
			}
		}
	}
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = string(t.t)
	}
	return "", fmt.Errorf("unknown fault type %q: use one of %s", s, strings.Join(names, ", "))
}

// Duration is a time.Duration written in JSON as a Go duration string
// ("250ms", "2s") and read from one or from a number of milliseconds.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration (e.g. 250ms, 2s)", s)
		}
		*d = Duration(v)
		return nil
	}
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("%s is not a duration: give a string (250ms) or a number of milliseconds", b)
	}
	*d = Duration(time.Duration(ms * float64(time.Millisecond)))
	return nil
}

// maxDelay bounds Result.Delay: past it the server's own write timeout
// would cut the reply anyway.
const maxDelay = 10 * time.Minute

// check validates a rule and fills in its derived fields; now is when it
// is added.
func (r *Rule) check(now time.Time) (*compiled, error) {
	t, err := ParseType(string(r.Result.Type))
	if err != nil {
		return nil, err
	}
	r.Result.Type = t
	c := &compiled{rule: r}
	switch {
	case r.Times < 0:
		return nil, fmt.Errorf("times must be 0 (no limit) or more, not %d", r.Times)
	case r.Probability < 0 || r.Probability > 1:
		return nil, fmt.Errorf("probability must be within (0, 1], not %v", r.Probability)
	case r.Result.Delay < 0 || time.Duration(r.Result.Delay) > maxDelay:
		return nil, fmt.Errorf("delay must be from 0 to %v, not %v", maxDelay, time.Duration(r.Result.Delay))
	case r.Result.RetryAfter < 0 || time.Duration(r.Result.RetryAfter) > maxDelay:
		return nil, fmt.Errorf("retryAfter must be from 0 to %v, not %v", maxDelay, time.Duration(r.Result.RetryAfter))
	case r.StartAfter < 0 || r.For < 0:
		return nil, fmt.Errorf("startAfter and for must not be negative")
	case r.Result.RetryAfter != 0 && t != TooManyRequests:
		return nil, fmt.Errorf("retryAfter goes with TooManyRequests only")
	case t == ResponseDelay && r.Result.Delay == 0:
		return nil, fmt.Errorf("ResponseDelay needs a delay")
	}
	switch t {
	case AppliedThenLost, LostBeforeApply:
		switch normalize(r.Result.Lost) {
		case "", normalize(LostReset):
			r.Result.Lost = LostReset
		case normalize(LostTimeout), "408", "requesttimeout":
			r.Result.Lost = LostTimeout
		case normalize(LostServiceUnavailable), "503":
			r.Result.Lost = LostServiceUnavailable
		default:
			return nil, fmt.Errorf("lost must be %q, %q or %q, not %q", LostReset, LostTimeout, LostServiceUnavailable, r.Result.Lost)
		}
	default:
		if r.Result.Lost != "" {
			return nil, fmt.Errorf("lost goes with AppliedThenLost and LostBeforeApply only")
		}
	}
	if t == TooManyRequests && r.Result.RetryAfter == 0 {
		r.Result.RetryAfter = Duration(100 * time.Millisecond)
	}
	if r.Probability == 1 {
		r.Probability = 0
	}
	if r.StartAfter > 0 {
		r.Start = now.Add(time.Duration(r.StartAfter))
		r.StartAfter = 0
	}
	if r.For > 0 {
		from := now
		if !r.Start.IsZero() && r.Start.After(now) {
			from = r.Start
		}
		r.End = from.Add(time.Duration(r.For))
		r.For = 0
	}
	if !r.Start.IsZero() && !r.End.IsZero() && !r.End.After(r.Start) {
		return nil, fmt.Errorf("end (%s) must be after start (%s)", r.End.Format(time.RFC3339Nano), r.Start.Format(time.RFC3339Nano))
	}
	cond := &r.Condition
	if len(cond.Operations) > 0 {
		c.ops = map[string]bool{}
		for i, name := range cond.Operations {
			ops, canonical, err := ParseOperation(name)
			if err != nil {
				return nil, err
			}
			cond.Operations[i] = canonical
			for _, op := range ops {
				c.ops[op] = true
			}
		}
	}
	if len(cond.PartitionKey) > 0 {
		pk, err := canonicalPartitionKey(string(cond.PartitionKey))
		if err != nil {
			return nil, fmt.Errorf("partitionKey: %v", err)
		}
		cond.PartitionKey = json.RawMessage(pk)
		c.pk = pk
	}
	if ip := cond.ClientIP; ip != "" {
		if strings.Contains(ip, "/") {
			_, n, err := net.ParseCIDR(ip)
			if err != nil {
				return nil, fmt.Errorf("clientIp %q is neither an address nor a network (CIDR)", ip)
			}
			c.network = n
		} else if c.ip = net.ParseIP(ip); c.ip == nil {
			return nil, fmt.Errorf("clientIp %q is neither an address nor a network (CIDR)", ip)
		}
	}
	c.userAgent = strings.ToLower(cond.UserAgent)
	if r.ID == "" {
		return nil, fmt.Errorf("a rule needs an id")
	}
	if len(r.ID) > 128 || strings.ContainsAny(r.ID, "/\\?#") {
		return nil, fmt.Errorf("rule id %q: at most 128 characters, none of / \\ ? #", r.ID)
	}
	return c, nil
}

// canonicalPartitionKey re-encodes a partition key header value (a JSON
// array, or one JSON value taken as a one-element array) compactly, so that
// two spellings of one key compare equal.
func canonicalPartitionKey(s string) (string, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("%q is not JSON", s)
	}
	if _, ok := v.([]any); !ok {
		v = []any{v}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// operations maps the SDKs' operation kinds to Orrery's operations (as the
// server's access table names them).
var operations = []struct {
	name    string
	aliases []string
	ops     []string
}{
	{"ReadItem", []string{"READ_ITEM", "READ"}, []string{"docs.read"}},
	{"QueryItem", []string{"QUERY_ITEM", "QUERY"}, []string{"docs.query"}},
	{"CreateItem", []string{"CREATE_ITEM", "CREATE"}, []string{"docs.create"}},
	{"UpsertItem", []string{"UPSERT_ITEM", "UPSERT"}, []string{"docs.upsert"}},
	{"ReplaceItem", []string{"REPLACE_ITEM", "REPLACE"}, []string{"docs.replace"}},
	{"DeleteItem", []string{"DELETE_ITEM", "DELETE"}, []string{"docs.delete"}},
	{"PatchItem", []string{"PATCH_ITEM", "PATCH"}, []string{"docs.patch"}},
	// Bulk goes out as batch requests, as the SDKs' libraries see it.
	{"BatchItem", []string{"BATCH_ITEM", "Batch"}, []string{"docs.batch", "docs.bulk"}},
	{"ChangeFeedItem", []string{"READ_FEED_ITEM", "ReadFeed"}, []string{"docs.changefeed"}},
	{"MetadataReadContainer", []string{"METADATA_REQUEST_CONTAINER", "MetadataContainer", "READ_CONTAINER"}, []string{"colls.read"}},
	{"MetadataReadDatabaseAccount", []string{"METADATA_REQUEST_DATABASE_ACCOUNT", "MetadataDatabaseAccount", "READ_DATABASE_ACCOUNT"}, []string{"account.read"}},
	{"MetadataQueryPlan", []string{"METADATA_REQUEST_QUERY_PLAN", "Query_QUERY_PLAN"}, []string{"docs.queryplan"}},
	{"MetadataPartitionKeyRanges", []string{"METADATA_REQUEST_PARTITION_KEY_RANGES", "MetadataPartitionKeyRange"}, []string{"pkranges.list"}},
	// Orrery's own, for what the libraries have no name for.
	{"ReadAllItems", []string{"READ_ALL_ITEMS"}, []string{"docs.list"}},
	{"ExecuteStoredProcedure", []string{"EXECUTE_STORED_PROCEDURE"}, []string{"sprocs.execute"}},
	{"DeleteAllItemsByPartitionKey", []string{"DELETE_ALL_ITEMS_BY_PARTITION_KEY"}, []string{"docs.partitionkeydelete"}},
	{"AllItems", []string{"ALL", "All"}, []string{"docs.read", "docs.query", "docs.create", "docs.upsert", "docs.replace", "docs.delete",
		"docs.patch", "docs.batch", "docs.bulk", "docs.changefeed", "docs.list", "docs.partitionkeydelete", "sprocs.execute"}},
}

// ParseOperation reads an operation kind by any of its names, or an
// Orrery operation name ("docs.read"), and returns the Orrery operations
// it covers and its canonical name.
func ParseOperation(s string) (ops []string, canonical string, err error) {
	if kind, verb, ok := strings.Cut(s, "."); ok && kind != "" && verb != "" && !strings.ContainsAny(s, " _") {
		return []string{strings.ToLower(s)}, strings.ToLower(s), nil
	}
	n := normalize(s)
	for _, o := range operations {
		if normalize(o.name) == n {
			return o.ops, o.name, nil
		}
		for _, a := range o.aliases {
			if normalize(a) == n {
				return o.ops, o.name, nil
			}
		}
	}
	names := make([]string, len(operations))
	for i, o := range operations {
		names[i] = o.name
	}
	return nil, "", fmt.Errorf("unknown operation %q: use one of %s, or an operation name as the metrics label it (docs.read)", s, strings.Join(names, ", "))
}

// String describes the rule in one line, for logs and the CLI.
func (r *Rule) String() string {
	var b strings.Builder
	b.WriteString(r.ID)
	b.WriteString(": ")
	b.WriteString(string(r.Result.Type))
	if r.Result.Lost != "" {
		b.WriteString(" (lost as " + r.Result.Lost + ")")
	}
	if r.Result.Delay > 0 {
		b.WriteString(" after " + time.Duration(r.Result.Delay).String())
	}
	if r.Result.RetryAfter > 0 {
		b.WriteString(" retry after " + time.Duration(r.Result.RetryAfter).String())
	}
	c := r.Condition
	var on []string
	if len(c.Operations) > 0 {
		on = append(on, strings.Join(c.Operations, "|"))
	}
	if c.Database != "" {
		on = append(on, "database "+c.Database)
	}
	if c.Container != "" {
		on = append(on, "container "+c.Container)
	}
	if len(c.PartitionKey) > 0 {
		on = append(on, "partition key "+string(c.PartitionKey))
	}
	if c.PartitionKeyRangeID != "" {
		on = append(on, "range "+c.PartitionKeyRangeID)
	}
	if c.ClientIP != "" {
		on = append(on, "client "+c.ClientIP)
	}
	if c.UserAgent != "" {
		on = append(on, "user agent ~"+strconv.Quote(c.UserAgent))
	}
	if c.User != "" {
		on = append(on, "user "+c.User)
	}
	if len(on) > 0 {
		b.WriteString(" on " + strings.Join(on, ", "))
	}
	if r.Times > 0 {
		fmt.Fprintf(&b, ", %d times", r.Times)
	}
	if r.Probability > 0 {
		fmt.Fprintf(&b, ", p=%g", r.Probability)
	}
	if !r.Start.IsZero() {
		b.WriteString(", from " + r.Start.Format(time.RFC3339))
	}
	if !r.End.IsZero() {
		b.WriteString(", until " + r.End.Format(time.RFC3339))
	}
	return b.String()
}
