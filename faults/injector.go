package faults

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// compiled is a rule with what matching needs precomputed, and its hits.
type compiled struct {
	rule      *Rule
	ops       map[string]bool
	pk        string
	ip        net.IP
	network   *net.IPNet
	userAgent string
	hits      atomic.Int64
}

// Injector holds the fault rules of a server. It is safe for concurrent use;
// the zero value is not: use New.
type Injector struct {
	// rules is nil when there is none: Match is then one atomic load.
	rules atomic.Pointer[[]*compiled]
	mu    sync.Mutex // serializes changes
	now   func() time.Time
	seq   atomic.Int64
	// onHit, when set, is told of every fault injected.
	onHit func(*Rule)
}

// Options configure an Injector.
type Options struct {
	// Now is the clock of the rules' windows; time.Now when nil.
	Now func() time.Time
	// OnHit, when set, is called with the rule of every fault injected
	// (the server counts them in its metrics).
	OnHit func(*Rule)
}

// New returns an Injector with no rules.
func New(opts Options) *Injector {
	in := &Injector{now: opts.Now, onHit: opts.OnHit}
	if in.now == nil {
		in.now = time.Now
	}
	return in
}

// SetOnHit sets the function told of every fault injected (see Options).
// Call it before the injector is used.
func (in *Injector) SetOnHit(f func(*Rule)) { in.onHit = f }

// Active reports whether any rule is installed.
func (in *Injector) Active() bool { return in != nil && in.rules.Load() != nil }

// Status is a rule as it stands: the rule and the requests it has faulted.
type Status struct {
	Rule
	Hits int64 `json:"hits"`
}

// Add installs rules after those already there, checking each; it installs
// none when one is invalid or reuses an id. A rule without an id gets one.
// It returns the rules as installed (with Start and End resolved).
func (in *Injector) Add(rules ...Rule) ([]Rule, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	var cur []*compiled
	if p := in.rules.Load(); p != nil {
		cur = *p
	}
	ids := map[string]bool{}
	for _, c := range cur {
		ids[c.rule.ID] = true
	}
	now := in.now()
	next := append([]*compiled(nil), cur...)
	out := make([]Rule, 0, len(rules))
	for i := range rules {
		r := rules[i]
		r.Condition.Operations = append([]string(nil), r.Condition.Operations...)
		if r.ID == "" {
			r.ID = "rule-" + strconv.FormatInt(in.seq.Add(1), 10)
			for ids[r.ID] {
				r.ID = "rule-" + strconv.FormatInt(in.seq.Add(1), 10)
			}
		}
		if ids[r.ID] {
			return nil, fmt.Errorf("rule %q: a rule with that id is installed already", r.ID)
		}
		c, err := r.check(now)
		if err != nil {
			return nil, fmt.Errorf("rule %q: %w", r.ID, err)
		}
		ids[r.ID] = true
		next = append(next, c)
		out = append(out, r)
	}
	if len(next) > 0 {
		in.rules.Store(&next)
	}
	return out, nil
}

// Remove uninstalls the rule with id; false when there is none.
func (in *Injector) Remove(id string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	p := in.rules.Load()
	if p == nil {
		return false
	}
	var next []*compiled
	found := false
	for _, c := range *p {
		if c.rule.ID == id {
			found = true
			continue
		}
		next = append(next, c)
	}
	if !found {
		return false
	}
	if len(next) == 0 {
		in.rules.Store(nil)
	} else {
		in.rules.Store(&next)
	}
	return true
}

// Clear uninstalls every rule and returns how many there were.
func (in *Injector) Clear() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	p := in.rules.Swap(nil)
	if p == nil {
		return 0
	}
	return len(*p)
}

// List returns the installed rules in the order they are tried, with their hits.
func (in *Injector) List() []Status {
	p := in.rules.Load()
	if p == nil {
		return []Status{}
	}
	out := make([]Status, len(*p))
	for i, c := range *p {
		out[i] = Status{Rule: *c.rule, Hits: c.hits.Load()}
	}
	return out
}

// Get returns the rule with id and its hits.
func (in *Injector) Get(id string) (Status, bool) {
	if p := in.rules.Load(); p != nil {
		for _, c := range *p {
			if c.rule.ID == id {
				return Status{Rule: *c.rule, Hits: c.hits.Load()}, true
			}
		}
	}
	return Status{}, false
}

// Request is what a rule's condition looks at. The server fills it in for
// each request when rules are installed.
type Request struct {
	// Operation is Orrery's name of the operation ("docs.read").
	Operation string
	// Database and Container are as the request's path names them;
	// DatabaseAlt and ContainerAlt the other spelling of each (the RID of
	// one named by id, the id of one named by RID), "" when unknown. A
	// condition matches either.
	Database, Container       string
	DatabaseAlt, ContainerAlt string
	// PartitionKey is the x-ms-documentdb-partitionkey header, "" when absent.
	PartitionKey string
	// ClientIP is the client's address (without port).
	ClientIP string
	// UserAgent is the User-Agent header.
	UserAgent string
	// Range returns the partition key range the request reaches ("" when
	// it reaches none or several); called only for a rule that names one.
	Range func() string
	// User returns the id of the user whose resource token signed the
	// request ("" for a key); called only for a rule that names one.
	User func() string
}

// Fault is a rule's decision for one request.
type Fault struct {
	// Rule is the rule that fired.
	Rule *Rule
}

// Match returns the fault to inject into req: the first installed rule
// whose condition holds, that is within its window, has hits left and
// passes its probability; it counts the hit. nil when none fires.
func (in *Injector) Match(req *Request) *Fault {
	p := in.rules.Load()
	if p == nil {
		return nil
	}
	var now time.Time
	var pk string
	pkDone := false
	for _, c := range *p {
		r := c.rule
		if !r.Start.IsZero() || !r.End.IsZero() {
			if now.IsZero() {
				now = in.now()
			}
			if (!r.Start.IsZero() && now.Before(r.Start)) || (!r.End.IsZero() && !now.Before(r.End)) {
				continue
			}
		}
		if r.Times > 0 && c.hits.Load() >= r.Times {
			continue
		}
		cond := &r.Condition
		if c.ops != nil && !c.ops[req.Operation] {
			continue
		}
		if cond.Database != "" && cond.Database != req.Database && cond.Database != req.DatabaseAlt {
			continue
		}
		if cond.Container != "" && cond.Container != req.Container && cond.Container != req.ContainerAlt {
			continue
		}
		if c.pk != "" {
			if !pkDone {
				pkDone = true
				if req.PartitionKey != "" {
					pk, _ = canonicalPartitionKey(req.PartitionKey)
				}
			}
			if pk != c.pk {
				continue
			}
		}
		if c.ip != nil || c.network != nil {
			ip := net.ParseIP(req.ClientIP)
			if ip == nil || (c.ip != nil && !c.ip.Equal(ip)) || (c.network != nil && !c.network.Contains(ip)) {
				continue
			}
		}
		if c.userAgent != "" && !strings.Contains(strings.ToLower(req.UserAgent), c.userAgent) {
			continue
		}
		if cond.User != "" && (req.User == nil || req.User() != cond.User) {
			continue
		}
		if cond.PartitionKeyRangeID != "" && (req.Range == nil || req.Range() != cond.PartitionKeyRangeID) {
			continue
		}
		if r.Probability > 0 && rand.Float64() >= r.Probability {
			continue
		}
		if !c.take() {
			continue
		}
		if in.onHit != nil {
			in.onHit(r)
		}
		return &Fault{Rule: r}
	}
	return nil
}

// take counts a hit if the rule has one left.
func (c *compiled) take() bool {
	if c.rule.Times == 0 {
		c.hits.Add(1)
		return true
	}
	for {
		n := c.hits.Load()
		if n >= c.rule.Times {
			return false
		}
		if c.hits.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// ParseRules reads rules from JSON: an array of rules, one rule, or an
// object {"rules": [...]}.
func ParseRules(b []byte) ([]Rule, error) {
	s := strings.TrimSpace(string(b))
	dec := func(v any) error {
		d := json.NewDecoder(strings.NewReader(s))
		d.DisallowUnknownFields()
		return d.Decode(v)
	}
	switch {
	case strings.HasPrefix(s, "["):
		var rules []Rule
		if err := dec(&rules); err != nil {
			return nil, fmt.Errorf("fault rules: %w", err)
		}
		return rules, nil
	case strings.HasPrefix(s, "{"):
		var wrapped struct {
			Rules []Rule `json:"rules"`
		}
		if err := dec(&wrapped); err == nil && wrapped.Rules != nil {
			return wrapped.Rules, nil
		}
		var r Rule
		if err := dec(&r); err != nil {
			return nil, fmt.Errorf("fault rule: %w", err)
		}
		return []Rule{r}, nil
	}
	return nil, fmt.Errorf("fault rules must be a JSON array of rules, one rule, or {\"rules\": [...]}")
}

// LoadFile reads rules from a JSON file (see ParseRules).
func LoadFile(path string) ([]Rule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseRules(b)
}
