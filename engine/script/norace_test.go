//go:build !race

package script

// raceEnabled relaxes the wall-clock assertions under the race detector.
const raceEnabled = false
