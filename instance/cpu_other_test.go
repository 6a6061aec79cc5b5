//go:build !unix

package instance

import "time"

// processCPU is not measured here.
func processCPU() time.Duration { return 0 }
