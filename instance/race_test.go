//go:build race

package instance

const raceEnabled = true
