//go:build race

package gc

// raceEnabled: the race detector's instrumentation makes frames larger
// (TestIdleWatchStackIsShallow only reports the depth then), as graph's.
const raceEnabled = true
