package faults

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestARuleFiresItsTimesAndNoMoreUnderConcurrency(t *testing.T) {
	in := New(Options{})
	if _, err := in.Add(Rule{ID: "r", Times: 7, Result: Result{Type: "TOO_MANY_REQUEST"}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	fired := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if in.Match(&Request{Operation: "docs.read"}) != nil {
					mu.Lock()
					fired++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if st, _ := in.Get("r"); fired != 7 || st.Hits != 7 {
		t.Fatalf("fired %d times, %d hits counted; want 7", fired, st.Hits)
	}
	if r := in.List()[0].Rule; r.Result.Type != TooManyRequests || time.Duration(r.Result.RetryAfter) != 100*time.Millisecond {
		t.Fatalf("the Java name was not read as TooManyRequests with its default retry-after: %+v", r.Result)
	}
}

func TestConditionsNarrowWhatARuleFaults(t *testing.T) {
	in := New(Options{})
	_, err := in.Add(Rule{ID: "r", Result: Result{Type: ServiceUnavailable}, Condition: Condition{
		Operations: []string{"CreateItem", "READ_ITEM"}, Database: "db", Container: "c",
		PartitionKey: json.RawMessage(`"alice"`), ClientIP: "10.0.0.0/8", UserAgent: "AZSDK-JS", User: "u1", PartitionKeyRangeID: "3",
	}})
	if err != nil {
		t.Fatal(err)
	}
	ok := func() *Request {
		return &Request{Operation: "docs.create", Database: "db", Container: "c", PartitionKey: `[ "alice" ]`, ClientIP: "10.1.2.3",
			UserAgent: "azsdk-js-cosmos/4.9.3", User: func() string { return "u1" }, Range: func() string { return "3" }}
	}
	if in.Match(ok()) == nil {
		t.Fatal("a request meeting every condition was not faulted")
	}
	for name, change := range map[string]func(*Request){
		"operation":  func(r *Request) { r.Operation = "docs.upsert" },
		"database":   func(r *Request) { r.Database = "other" },
		"container":  func(r *Request) { r.Container = "other" },
		"pk":         func(r *Request) { r.PartitionKey = `["bob"]` },
		"client":     func(r *Request) { r.ClientIP = "192.168.0.1" },
		"user agent": func(r *Request) { r.UserAgent = "azsdk-go-azcosmos/v1.5.0" },
		"user":       func(r *Request) { r.User = func() string { return "u2" } },
		"no token":   func(r *Request) { r.User = nil },
		"range":      func(r *Request) { r.Range = func() string { return "4" } },
	} {
		r := ok()
		change(r)
		if in.Match(r) != nil {
			t.Errorf("a request differing in its %s was faulted", name)
		}
	}
	r := ok()
	r.Container, r.ContainerAlt = "Xy0BAA==", "c"
	if in.Match(r) == nil {
		t.Error("a container named by RID, whose id the condition names, was not faulted")
	}
}

func TestWindowsAndProbability(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	in := New(Options{Now: func() time.Time { return now }})
	if _, err := in.Add(Rule{ID: "later", StartAfter: Duration(time.Minute), For: Duration(time.Minute), Result: Result{Type: Timeout}}); err != nil {
		t.Fatal(err)
	}
	if in.Match(&Request{}) != nil {
		t.Fatal("fired before its start")
	}
	now = now.Add(90 * time.Second)
	if in.Match(&Request{}) == nil {
		t.Fatal("did not fire within its window")
	}
	now = now.Add(time.Minute)
	if in.Match(&Request{}) != nil {
		t.Fatal("fired after its end")
	}
	in.Clear()
	if _, err := in.Add(Rule{ID: "coin", Probability: 0.25, Result: Result{Type: Timeout}}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for range 4000 {
		if in.Match(&Request{}) != nil {
			n++
		}
	}
	if n < 700 || n > 1300 {
		t.Fatalf("probability 0.25 fired %d times in 4000", n)
	}
	if st, _ := in.Get("coin"); st.Hits != int64(n) {
		t.Fatalf("%d hits counted, %d fired: a spared request is no hit", st.Hits, n)
	}
}

func TestBadRulesAreRefusedWholeWithWhy(t *testing.T) {
	in := New(Options{})
	for rule, why := range map[string]string{
		`{"id":"a","result":{"type":"Explode"}}`:                                           "unknown fault type",
		`{"id":"a","result":{"type":"Timeout","lost":"reset"}}`:                            "lost goes with",
		`{"id":"a","result":{"type":"AppliedThenLost","lost":"maybe"}}`:                    "lost must be",
		`{"id":"a","result":{"type":"ResponseDelay"}}`:                                     "needs a delay",
		`{"id":"a","result":{"type":"Timeout","retryAfter":"1s"}}`:                         "retryAfter goes with",
		`{"id":"a","probability":2,"result":{"type":"Timeout"}}`:                           "probability",
		`{"id":"a","times":-1,"result":{"type":"Timeout"}}`:                                "times",
		`{"id":"a","condition":{"operations":["Frobnicate"]},"result":{"type":"Timeout"}}`: "unknown operation",
		`{"id":"a","condition":{"clientIp":"nowhere"},"result":{"type":"Timeout"}}`:        "clientIp",
		`{"id":"a/b","result":{"type":"Timeout"}}`:                                         "rule id",
		`{"id":"a","result":{"type":"Timeout"},"color":"red"}`:                             "unknown field",
	} {
		rules, err := ParseRules([]byte(rule))
		if err == nil {
			_, err = in.Add(append(rules, Rule{ID: "fine", Result: Result{Type: Timeout}})...)
		}
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v, want an error saying %q", rule, err, why)
		}
	}
	if in.Active() {
		t.Fatal("a refused batch installed a rule")
	}
	if _, err := in.Add(Rule{ID: "x", Result: Result{Type: Timeout}}, Rule{ID: "x", Result: Result{Type: Timeout}}); err == nil {
		t.Fatal("two rules of one id were installed")
	}
}

func TestNoRuleIsOneLoad(t *testing.T) {
	in := New(Options{})
	if in.Active() || in.Match(&Request{}) != nil {
		t.Fatal("an empty injector faulted")
	}
	if _, err := in.Add(Rule{Result: Result{Type: Timeout}}); err != nil {
		t.Fatal(err)
	}
	if !in.Active() || in.Clear() != 1 || in.Active() {
		t.Fatal("Clear did not return the injector to no rule")
	}
}

func BenchmarkMatchNoRule(b *testing.B) {
	in := New(Options{})
	r := &Request{Operation: "docs.read"}
	for b.Loop() {
		if in.Active() {
			in.Match(r)
		}
	}
}
