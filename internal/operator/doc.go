// Package operator wires the operator's parts into a controller-runtime manager: the cache
// configuration, the SidecarSet snapshot, both webhooks, the status reconciler and the health
// checks. main.go and the integration tests both use it, so tests run what ships.
package operator
