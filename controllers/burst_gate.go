package controllers

import (
	"context"
	"time"
)

// burstGate holds back status writes while pods change: during a burst of pod events every
// set's counts change again within moments, and each status write is a SidecarSet update that
// competes with the burst's own requests for the API server. While busy says pods are changing,
// at most cap(slots) reconciles run at once; once they stop, every worker runs, so that the sets
// the burst left pending are written as soon as the API server can take them.
type burstGate struct {
	slots chan struct{}
	// busy reports whether pods are changing.
	busy func() bool
	// poll is how often a reconcile waiting for a slot asks busy again.
	poll time.Duration
}

func newBurstGate(slots int, busy func() bool, poll time.Duration) *burstGate {
	return &burstGate{slots: make(chan struct{}, slots), busy: busy, poll: poll}
}

// enter returns when the caller may reconcile, with the function that ends its turn: at once
// when pods are not changing, otherwise once it holds a slot or pods stopped changing.
func (g *burstGate) enter(ctx context.Context) (leave func(), err error) {
	if g == nil || !g.busy() {
		return func() {}, nil
	}
	tick := time.NewTicker(g.poll)
	defer tick.Stop()
	for {
		select {
		case g.slots <- struct{}{}:
			return func() { <-g.slots }, nil
		case <-tick.C:
			if !g.busy() {
				return func() {}, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
