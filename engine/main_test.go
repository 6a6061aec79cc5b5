package engine

import (
	"fmt"
	"os"
	"testing"

	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// TestMain runs the engine's tests on memory storage, then on shared
// memory storage (memory.NewShared: the engine's shared seam, in process),
// and then, when PostgreSQL is installed, once more with every test engine
// on a PostgreSQL store of its own (newTestStore), so that both seams and
// the shared backend are held to the engine's whole behaviour, not only to
// the shared-store tests. The few tests about a single-process embedded
// store skip the shared passes and say why (skipOnPostgres).
// ORRERY_TEST_STORAGE=memory, =shared or =postgres runs one pass only;
// ORRERY_REQUIRE_POSTGRES=1 fails the run when PostgreSQL is missing
// instead of leaving the second pass out.
func TestMain(m *testing.M) {
	code := 0
	mode := os.Getenv(storageEnv)
	if mode == "" || mode == "memory" {
		code = m.Run()
	}
	if (mode == "" || mode == "shared") && code == 0 {
		fmt.Println("engine: the suite again, on shared memory storage")
		testOnShared = true
		code = m.Run()
		testOnShared = false
	}
	if mode == "placed" && code == 0 {
		fmt.Println("engine: the suite again, on two shared memory stores as two databases")
		testOnShared, testOnPlaced = true, true
		code = m.Run()
		testOnShared, testOnPlaced = false, false
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
