// Package refusals keeps what one operator replica's pod webhook refused because of each
// SidecarSet, and publishes it where the set's owner looks: the set's status.refusals (one
// entry per replica, each written by its replica alone with server-side apply, so several
// replicas feed one status without overwriting each other) and a PodRefused Warning event on
// the set, at most once a minute per set and replica. The status reconciler turns the entries
// into the Refusing condition (see status.WithRefusals).
//
// The webhook only records (Ledger.Refused is a map update under a lock); writing happens in
// the background, coalesced, so a refusal never waits on the API server, and a burst of
// refusals (a ReplicaSet retrying its pods) costs one write per interval.
package refusals
