//go:build !race

package instance

// raceEnabled: the race detector allocates on its own, so the counted
// budgets' allocations are not kept under it.
const raceEnabled = false
