// Package policy compiles a SidecarSet into the MutatingAdmissionPolicy (and its binding) that
// injects it inside the API server, with no webhook call: the operator's policy mode
// (docs/design/policy-mode.md).
//
// A compiled policy injects only pods it can inject exactly as the engine would: the pod is
// selected by this set alone, carries no record yet, and has no container, init container or
// volume of an injected name. Every other pod it routes to the webhook by adding the label and
// the annotation sidecarset.io/webhook; the webhook (registered in policy mode with a
// matchCondition on either) then runs the engine as it always does, refusals and their messages
// included, and removes both. A set whose content CEL cannot express the engine's way is compiled to
// a policy that routes every pod it selects, and Compile says which field keeps it there.
//
// Compile is a pure function of the SidecarSet, the other SidecarSets and the options.
package policy
