//go:build race

package graph

// raceEnabled scales down the randomized tests: the race detector slows
// them about fivefold and they add no concurrency to detect races in.
const raceEnabled = true
