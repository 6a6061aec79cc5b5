// Command summary reads `go test -json` and prints what a person needs of
// it: each package's result line as go test prints it, the output of each
// test that failed, and at the end every skipped test grouped by the reason
// it gave, what .ci/test left out (ORRERY_TEST_NOTES), then one line
// "N passed, N failed, N skipped". It exits 1 when a test or a package
// failed, when a run exited non-zero (.ci/test's "exit" events), or when
// no test ran.
//
//	go test -json ./... | go run .ci/summary/main.go
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// event is one line of go test -json (see go doc test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Elapsed    float64
	Output     string
}

// logLine is a line a test logged (t.Log, t.Skip): "    file_test.go:12: text".
var logLine = regexp.MustCompile(`^\s+\S+\.go:\d+: (.*)$`)

type result struct {
	passed, failed, skipped int
	skips                   map[string][]string // reason: tests
	failedPkgs              []string
	exits                   []string // non-zero exit statuses
}

func main() {
	r, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(2)
	}
	if r.failed > 0 || len(r.failedPkgs) > 0 || len(r.exits) > 0 || r.passed == 0 {
		os.Exit(1)
	}
}

func summarize(in io.Reader, out io.Writer) (*result, error) {
	r := &result{skips: map[string][]string{}}
	outputs := map[string][]string{} // package + test: its output lines
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Not an event: go vet's or the build's own words.
			fmt.Fprintln(out, string(line))
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "exit":
			// .ci/test's own event: a go test run's exit status, which
			// is not 0 also when no test failed (a build, vet, a timeout).
			if e.Output != "0" {
				r.exits = append(r.exits, e.Output)
			}
		case "build-output":
			fmt.Fprint(out, e.Output)
		case "output":
			// Kept until the test (or, for a package's own lines:
			// TestMain's, a panic's, the build's, the package) ends.
			outputs[key] = append(outputs[key], e.Output)
		case "pass":
			if e.Test != "" {
				r.passed++
				delete(outputs, key)
			} else {
				fmt.Fprintf(out, "ok  \t%s\t%.1fs\n", e.Package, e.Elapsed)
				delete(outputs, key)
			}
		case "skip":
			if e.Test != "" {
				r.skipped++
				reason := skipReason(outputs[key])
				r.skips[reason] = append(r.skips[reason], shortPkg(e.Package)+"."+e.Test)
				delete(outputs, key)
			} else {
				delete(outputs, key) // no test files
			}
		case "fail":
			if e.Test != "" {
				r.failed++
				fmt.Fprintf(out, "--- FAIL: %s %s (%.1fs)\n", e.Package, e.Test, e.Elapsed)
				for _, l := range outputs[key] {
					fmt.Fprint(out, "    ", l)
				}
				delete(outputs, key)
			} else {
				r.failedPkgs = append(r.failedPkgs, e.Package)
				for _, l := range outputs[key] {
					fmt.Fprint(out, l)
				}
				fmt.Fprintf(out, "FAIL\t%s\t%.1fs\n", e.Package, e.Elapsed)
				delete(outputs, key)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(r.skips) > 0 {
		fmt.Fprintf(out, "\nSkipped, and why (%d tests):\n", r.skipped)
		reasons := make([]string, 0, len(r.skips))
		for reason := range r.skips {
			reasons = append(reasons, reason)
		}
		sort.Slice(reasons, func(i, j int) bool {
			if len(r.skips[reasons[i]]) != len(r.skips[reasons[j]]) {
				return len(r.skips[reasons[i]]) > len(r.skips[reasons[j]])
			}
			return reasons[i] < reasons[j]
		})
		for _, reason := range reasons {
			tests := r.skips[reason]
			shown := tests
			if len(shown) > 3 {
				shown = append(shown[:3:3], fmt.Sprintf("and %d more", len(tests)-3))
			}
			fmt.Fprintf(out, "  %d × %s\n      (%s)\n", len(tests), reason, strings.Join(shown, ", "))
		}
	}
	if notes := strings.TrimSpace(os.Getenv("ORRERY_TEST_NOTES")); notes != "" {
		fmt.Fprintf(out, "\nLeft out by .ci/test:\n")
		for _, n := range strings.Split(notes, "\n") {
			fmt.Fprintf(out, "  %s\n", n)
		}
	}
	if len(r.failedPkgs) > 0 {
		fmt.Fprintf(out, "\nFailed packages: %s\n", strings.Join(r.failedPkgs, " "))
	}
	if len(r.exits) > 0 {
		fmt.Fprintf(out, "\nA test run exited with status %s (see above)\n", strings.Join(r.exits, ", "))
	}
	fmt.Fprintf(out, "\n%d passed, %d failed, %d skipped\n", r.passed, r.failed, r.skipped)
	return r, nil
}

// skipReason is the last message a skipped test logged: what it gave
// t.Skip.
func skipReason(lines []string) string {
	reason := "(no reason given)"
	for _, l := range lines {
		if m := logLine.FindStringSubmatch(strings.TrimRight(l, "\n")); m != nil {
			reason = m[1]
		}
	}
	return reason
}

// shortPkg drops the module path from a package's import path.
func shortPkg(p string) string {
	return strings.TrimPrefix(strings.TrimPrefix(p, "github.com/orrery-db/orrery"), "/")
}
