// Package snapshot keeps an always-ready, read-only view of every SidecarSet in compiled form
// (selectors parsed, hash computed), rebuilt from informer events. The pod webhook reads it on
// every admission without listing, copying or parsing anything, which is what keeps admission
// cost flat as SidecarSets are added; the reconciler reads it to map Pod events to SidecarSets.
package snapshot
