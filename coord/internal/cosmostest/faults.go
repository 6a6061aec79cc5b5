package cosmostest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// Fault rules are installed through Orrery's administrative API
// (/_admin/faults, signed with the master key), so coord's tests inject
// faults into a server process without importing any of it. The types below
// are the API's JSON shapes.

// Rule is one fault rule: when a request meets Condition, the server answers
// it with Result, at most Times times (0: no limit), with the given
// Probability (0: always).
type Rule struct {
	ID          string    `json:"id,omitempty"`
	Condition   Condition `json:"condition"`
	Result      Result    `json:"result"`
	Times       int64     `json:"times,omitempty"`
	Probability float64   `json:"probability,omitempty"`
	// StartAfter and For bound when the rule fires, relative to when it
	// is added, as Go durations ("1.5s").
	StartAfter string `json:"startAfter,omitempty"`
	For        string `json:"for,omitempty"`
}

// Condition is what a request must be for a rule to fire.
type Condition struct {
	// Operations are the SDKs' fault libraries' operation kinds: ReadItem,
	// CreateItem, ReplaceItem, UpsertItem, DeleteItem, PatchItem, QueryItem,
	// BatchItem, ChangeFeedItem...
	Operations []string `json:"operations,omitempty"`
	Database   string   `json:"database,omitempty"`
	Container  string   `json:"container,omitempty"`
}

// Result is what a rule does to a request it fires for.
type Result struct {
	Type       string `json:"type"`
	Delay      string `json:"delay,omitempty"`
	RetryAfter string `json:"retryAfter,omitempty"`
	// Lost is how AppliedThenLost and LostBeforeApply lose the reply:
	// "reset" (default), "Timeout" (408) or "ServiceUnavailable" (503).
	Lost string `json:"lost,omitempty"`
}

// The results every kind of fault the server injects can have, each once.
// The split (PartitionIsGone) really splits the range a request reaches.
var AllResults = []Result{
	{Type: "TooManyRequests", RetryAfter: "20ms"},
	{Type: "Timeout"},
	{Type: "ServiceUnavailable"},
	{Type: "InternalServerError"},
	{Type: "RetryWith"},
	{Type: "PartitionIsGone"},
	{Type: "PartitionIsSplitting"},
	{Type: "PartitionIsMigrating"},
	{Type: "ReadSessionNotAvailable"},
	{Type: "ResponseDelay", Delay: "30ms"},
	{Type: "ConnectionReset"},
	{Type: "AppliedThenLost"},
	{Type: "AppliedThenLost", Lost: "Timeout"},
	{Type: "AppliedThenLost", Lost: "ServiceUnavailable"},
	{Type: "LostBeforeApply"},
	{Type: "LostBeforeApply", Lost: "Timeout"},
	{Type: "LostBeforeApply", Lost: "ServiceUnavailable"},
}

// RandomRules returns one rule per kind of fault (AllResults) for requests
// that meet cond (a database, a container, operations), each firing with
// probability p, in an order shuffled by seed. Splits are limited to
// splits (so a container ends with at most 1+splits ranges); 0 leaves them
// out.
func RandomRules(seed uint64, cond Condition, p float64, splits int64) []Rule {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var rules []Rule
	for _, res := range AllResults {
		rule := Rule{Condition: cond, Result: res, Probability: p}
		if res.Type == "PartitionIsGone" {
			if splits == 0 {
				continue
			}
			rule.Times = splits
		}
		rules = append(rules, rule)
	}
	r.Shuffle(len(rules), func(i, j int) { rules[i], rules[j] = rules[j], rules[i] })
	return rules
}

// Seed is the seed of a randomized fault test: COORD_FAULT_SEED when set
// (to replay a failure), otherwise a fresh one; it is logged either way.
func Seed(t testing.TB) uint64 {
	t.Helper()
	var s uint64
	if v := os.Getenv("COORD_FAULT_SEED"); v != "" {
		if _, err := fmt.Sscan(v, &s); err != nil {
			t.Fatalf("COORD_FAULT_SEED=%q: %v", v, err)
		}
	} else {
		s = rand.Uint64()
	}
	t.Logf("fault seed %d (set COORD_FAULT_SEED to replay)", s)
	return s
}

// RuleStatus is an installed rule with its hits.
type RuleStatus struct {
	Rule
	Hits int64 `json:"hits"`
}

// AddFaults installs rules on the server and returns them with their ids.
// The test is skipped when the server has no fault API (Azure, the
// emulator). The rules are removed when the test ends.
func (s *Server) AddFaults(t testing.TB, rules ...Rule) []Rule {
	t.Helper()
	b, _ := json.Marshal(rules)
	status, out := s.admin(t, http.MethodPost, "", b)
	if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
		t.Skipf("cosmostest: the server has no fault API (%d %s)", status, out)
	}
	if status != http.StatusCreated {
		t.Fatalf("cosmostest: adding fault rules: %d %s", status, out)
	}
	var added struct{ Rules []Rule }
	if err := json.Unmarshal(out, &added); err != nil {
		t.Fatalf("cosmostest: decoding fault rules: %v", err)
	}
	t.Cleanup(func() {
		for _, r := range added.Rules {
			s.admin(t, http.MethodDelete, r.ID, nil)
		}
	})
	return added.Rules
}

// ClearFaults removes every fault rule of the server.
func (s *Server) ClearFaults(t testing.TB) {
	t.Helper()
	if status, out := s.admin(t, http.MethodDelete, "", nil); status != http.StatusOK {
		t.Fatalf("cosmostest: clearing fault rules: %d %s", status, out)
	}
}

// FaultHits lists the server's rules with how often each fired.
func (s *Server) FaultHits(t testing.TB) []RuleStatus {
	t.Helper()
	status, out := s.admin(t, http.MethodGet, "", nil)
	if status != http.StatusOK {
		t.Fatalf("cosmostest: listing fault rules: %d %s", status, out)
	}
	var list struct{ Rules []RuleStatus }
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("cosmostest: decoding fault rules: %v", err)
	}
	return list.Rules
}

// LogHits logs how often each fault kind fired, and returns the total.
func (s *Server) LogHits(t testing.TB) int64 {
	t.Helper()
	var total int64
	var parts []string
	for _, r := range s.FaultHits(t) {
		total += r.Hits
		name := r.Result.Type
		if r.Result.Lost != "" {
			name += "/" + r.Result.Lost
		}
		parts = append(parts, fmt.Sprintf("%s=%d", name, r.Hits))
	}
	t.Logf("faults injected: %d (%s)", total, strings.Join(parts, " "))
	return total
}

// admin sends a call on the fault rules (id "" for all of them), signed
// with the master key as resource type "faults".
func (s *Server) admin(t testing.TB, method, id string, body []byte) (int, []byte) {
	t.Helper()
	link, path := "", "_admin/faults"
	if id != "" {
		link, path = "faults/"+id, path+"/"+id
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	key, err := base64.StdEncoding.DecodeString(s.Key)
	if err != nil {
		t.Fatalf("cosmostest: the key is not base64: %v", err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(strings.ToLower(method) + "\nfaults\n" + link + "\n" + strings.ToLower(date) + "\n\n"))
	auth := url.QueryEscape("type=master&ver=1.0&sig=" + base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	req, err := http.NewRequest(method, strings.TrimSuffix(s.Endpoint, "/")+"/"+path, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("cosmostest: %v", err)
	}
	req.Header.Set("x-ms-date", date)
	req.Header.Set("x-ms-version", "2020-07-15")
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("cosmostest: %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}
