package cosmostest

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// StartForMain is Start for a TestMain, which has no testing.TB: runnable
// examples need a server before any test runs. It returns the server and a
// function that stops it. err is ErrNoEndpoint (wrapped) outside the
// repository without COORD_TEST_ENDPOINT, when the caller may skip what
// needs a server; any other error is a failure.
func StartForMain() (s *Server, stop func(), err error) {
	if ep := os.Getenv("COORD_TEST_ENDPOINT"); ep != "" {
		key := os.Getenv("COORD_TEST_KEY")
		if key == "" {
			key = EmulatorKey
		}
		return &Server{Endpoint: ep, Key: key}, func() {}, nil
	}
	bin, err := orreryBinary()
	if err != nil {
		return nil, nil, err
	}
	s, err = startProcess(bin)
	if err != nil {
		return nil, nil, err
	}
	return s, func() {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}, nil
}

// NewClient returns a client for the server with the given options (nil for
// the defaults), for tests that add policies to the pipeline.
func (s *Server) NewClient(o *azcosmos.ClientOptions) (*azcosmos.Client, error) {
	cred, err := azcosmos.NewKeyCredential(s.Key)
	if err != nil {
		return nil, err
	}
	return azcosmos.NewClientWithKey(s.Endpoint, cred, o)
}

// Env is the environment that points a child process (a test binary
// re-executed as a worker) at this server through COORD_TEST_ENDPOINT.
func (s *Server) Env() []string {
	return []string{"COORD_TEST_ENDPOINT=" + s.Endpoint, "COORD_TEST_KEY=" + s.Key}
}

// RunMain is a TestMain body for packages whose runnable examples need a
// server: it starts one, hands it to set, runs the tests and examples, and
// stops it. Without an endpoint (ErrNoEndpoint) it runs them with set never
// called, so examples must be guarded by the tests that need one; a server
// that fails to start fails the run.
func RunMain(m *testing.M, set func(*Server)) int {
	s, stop, err := StartForMain()
	switch {
	case errors.Is(err, ErrNoEndpoint):
		fmt.Fprintln(os.Stderr, "cosmostest:", err)
	case err != nil:
		fmt.Fprintln(os.Stderr, "cosmostest:", err)
		return 1
	default:
		set(s)
		defer stop()
	}
	return m.Run()
}
