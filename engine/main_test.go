package engine

import (
	"os"
	"testing"

	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// TestMain stops the PostgreSQL server that the shared-store tests start.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.StopShared()
	os.Exit(code)
}
