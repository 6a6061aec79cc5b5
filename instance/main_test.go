package instance

import (
	"os"
	"testing"

	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// TestMain stops the PostgreSQL server the counted budget's postgres rows
// start (pgtest's shared one), if they started it.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
