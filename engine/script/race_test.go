//go:build race

package script

// raceEnabled relaxes the wall-clock assertions: under the race detector
// making a runtime takes a large part of a second.
const raceEnabled = true
