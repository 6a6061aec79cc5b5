package engine

import (
	"fmt"
	"os"
	"testing"

	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// TestMain runs the engine's tests on memory storage and then, when
// PostgreSQL is installed, once more with every test engine on a
// PostgreSQL store of its own (newTestStore), so that the shared backend
// is held to the engine's whole behaviour, not only to the shared-store
// tests. The few tests about a single-process embedded store skip the
// second pass and say why (skipOnPostgres).
// ORRERY_TEST_STORAGE=memory or =postgres runs one of the two only;
// ORRERY_REQUIRE_POSTGRES=1 fails the run when PostgreSQL is missing
// instead of leaving the second pass out.
func TestMain(m *testing.M) {
	code := 0
	mode := os.Getenv(storageEnv)
	if mode != "postgres" {
		code = m.Run()
	}
	if mode == "" && code == 0 {
		switch err := pgtest.Available(); {
		case err == nil:
			fmt.Println("engine: the suite again, on PostgreSQL")
			mode = "postgres"
		case os.Getenv(pgtest.RequireEnv) == "1":
			fmt.Fprintf(os.Stderr, "engine: %s=1 but PostgreSQL cannot be used: %v\n", pgtest.RequireEnv, err)
			code = 1
		}
	}
	if mode == "postgres" && code == 0 {
		testOnPostgres = true
		code = m.Run()
	}
	pgtest.StopShared()
	os.Exit(code)
}
