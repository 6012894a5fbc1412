// Package inject is the injection engine: a pure function from a Pod and the SidecarSets that
// may apply to it to the Pod's injected form, described as a Result that can be rendered either
// as a mutated Pod (offline injection, golden tests) or as JSON patch operations (the admission
// webhook). It holds no client, no clock and no globals, and never mutates its inputs: Pods and
// SidecarSets handed in may come straight from an informer cache.
//
// The engine also owns the gate (Gate, in gate.go): the one rule of which pods may be injected
// at all, whatever the SidecarSets select, with its typed reasons and the forms the API server
// applies (selectors, an annotation to test in CEL). The webhook, status, explain, the kubectl
// plugin and policy mode ask it rather than restating it.
package inject
