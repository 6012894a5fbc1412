// Package testutil holds the helpers the integration and end-to-end tests share: polling, and
// how a rolling update sees a pod.
package testutil

import (
	"testing"
	"time"
)

// Eventually polls cond every interval until it holds or timeout passes, and returns how long
// that took. cond's message says what it last saw; it ends up in the failure.
func Eventually(t testing.TB, timeout, interval time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	last := ""
	for time.Since(start) < timeout {
		ok, msg := cond()
		if ok {
			return time.Since(start)
		}
		last = msg
		time.Sleep(interval)
	}
	t.Fatalf("timed out after %v waiting for %s; last seen: %s", timeout, what, last)
	return 0
}
