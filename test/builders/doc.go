// Package builders builds the SidecarSets and Pods that tests start from. Every test package
// spells an object the same way, with options that name what matters to the test (which app a
// set selects, its sidecars, its resourceVersion), so a reader need not look up a
// package-local helper to learn what it built. A package whose tests share a richer fixture
// (the integration suite's agent set, the injector's web pod) names it for what it is and
// builds it from these.
package builders
