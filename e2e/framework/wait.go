package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Poll calls cond at once and then every period until it returns true (Poll returns nil), it
// returns an error (Poll returns that error), or timeout passes (Poll returns an error saying
// so). cond runs on the caller's goroutine, so it may fail the test.
func Poll(timeout, period time.Duration, cond func() (bool, error)) error {
	err := wait.PollUntilContextTimeout(context.Background(), period, timeout, true, func(context.Context) (bool, error) {
		return cond()
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("not done after %s", timeout)
	}
	return err
}

// Eventually polls cond every 100 ms until it is true or timeout passes; then the test fails,
// naming what was awaited and cond's last error. An error from cond does not end the wait.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	EventuallyEvery(t, 100*time.Millisecond, timeout, what, cond)
}

// EventuallyEvery is Eventually polling every period: for waits whose end is a measurement or
// must be seen quickly.
func EventuallyEvery(t testing.TB, period, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	if err := Poll(timeout, period, func() (bool, error) {
		ok, err := cond()
		last = err
		return ok, nil
	}); err != nil {
		t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
	}
}

// Consistently checks cond every 200 ms for d and fails the test the first time it returns an
// error: for what must never happen. A quiet period proves little by itself: run it after a
// canary or a condition that shows the collector got past the point where it would have acted.
func Consistently(t testing.TB, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if err := cond(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// MeasurementPause waits d where a measurement's protocol says to, and no condition can stand
// in for it: the window after a run's last event in which the subject's requests still count
// as the run's, the time memory is left to settle before it is sampled, the spacing of
// samples, a client's rate limiter refilling between timed repetitions. A wait for a state
// polls for it (Eventually); what must not happen is checked for a while (Consistently).
func MeasurementPause(d time.Duration) { time.Sleep(d) }

// WaitGone polls get until it answers NotFound; another error is retried and reported if the
// wait times out.
func WaitGone(t testing.TB, what string, timeout time.Duration, get func() error) {
	t.Helper()
	Eventually(t, timeout, what+" gone", func() (bool, error) {
		err := get()
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
