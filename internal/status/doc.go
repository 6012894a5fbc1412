// Package status computes a SidecarSet's status from the Pods and Namespaces in the cache. It
// is pure: no client and no clock (the caller passes the time for new conditions), so the
// reconciler writes status only when this function's answer differs from what is stored.
package status
