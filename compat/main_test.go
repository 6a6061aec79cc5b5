package compat

import (
	"fmt"
	"os"
	"testing"

	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/orrerytest/onpostgres"
)

// TestMain runs the suite on memory storage and then, when PostgreSQL is
// installed, once more with every server on PostgreSQL
// (storage/postgres), so that the shared backend is held to the same
// behaviour: the Go, JavaScript and Python SDK suites alike.
// ORRERY_TEST_STORAGE=memory or =postgres runs one of the two
// only; ORRERY_REQUIRE_POSTGRES=1 fails the run when PostgreSQL is missing
// instead of leaving it out.
func TestMain(m *testing.M) {
	code := 0
	mode := os.Getenv(orrerytest.StorageEnv)
	if mode != "postgres" {
		code = m.Run()
	}
	if mode == "" && code == 0 {
		switch err := onpostgres.Available(); {
		case err == nil:
			fmt.Println("compat: the suite again, on PostgreSQL")
			os.Setenv(orrerytest.StorageEnv, "postgres")
			code = m.Run()
		case os.Getenv("ORRERY_REQUIRE_POSTGRES") == "1":
			fmt.Fprintf(os.Stderr, "compat: ORRERY_REQUIRE_POSTGRES=1 but PostgreSQL cannot be used: %v\n", err)
			code = 1
		}
	}
	if mode == "postgres" {
		code = m.Run()
	}
	onpostgres.Stop()
	os.Exit(code)
}
