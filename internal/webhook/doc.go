// Package webhook holds the admission edges of the operator: the pod injector (a raw
// admission.Handler that mutates opted-in Pods) and the SidecarSet validator. Both only
// translate between admission requests and the pure inject and validation packages.
package webhook
