package cosmostest

import (
	"os"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// StartForMain is Start for a TestMain, which has no testing.TB: runnable
// examples need a server before any test runs. It returns the server and a
// function that stops it. err is non-nil when there is no endpoint (outside
// the repository without COORD_TEST_ENDPOINT) or the server did not start;
// the caller then skips what needs one.
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
