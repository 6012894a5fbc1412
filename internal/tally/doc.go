// Package tally keeps SidecarSet status counts current from Pod and Namespace events, so the
// work per event does not grow with the number of Pods.
package tally
