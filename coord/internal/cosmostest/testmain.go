package cosmostest

import (
	"fmt"
	"os"
	"testing"
)

// mainTB lets Start run from TestMain, where there is no test: it records
// cleanups and turns a skip or failure into a message.
type mainTB struct {
	testing.TB
	cleanups []func()
	failed   error
	skipped  string
}

func (m *mainTB) Helper()             {}
func (m *mainTB) Cleanup(f func())    { m.cleanups = append(m.cleanups, f) }
func (m *mainTB) Logf(string, ...any) {}
func (m *mainTB) Skipf(format string, args ...any) {
	m.skipped = fmt.Sprintf(format, args...)
	panic(m)
}
func (m *mainTB) Fatalf(format string, args ...any) {
	m.failed = fmt.Errorf(format, args...)
	panic(m)
}

// RunMain is a TestMain body for packages whose runnable examples need a
// server: it starts one as Start does, hands it to set, runs the tests and
// examples, and stops it. Without an endpoint it runs them with set never
// called, so examples must be guarded by the tests that need one.
func RunMain(m *testing.M, set func(*Server)) int {
	tb := &mainTB{}
	s := func() (s *Server) {
		defer func() {
			if r := recover(); r != nil {
				if r != any(tb) {
					panic(r)
				}
				s = nil
			}
		}()
		return Start(tb)
	}()
	if tb.failed != nil {
		fmt.Fprintln(os.Stderr, tb.failed)
		return 1
	}
	if s != nil {
		set(s)
	}
	code := m.Run()
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}
	return code
}
