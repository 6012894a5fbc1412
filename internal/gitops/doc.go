// Package gitops says what GitOps tools make of a SidecarSet: Argo CD, by running its health
// check (config/argocd/health.lua) as Argo CD runs a resource customization, and kstatus (Flux,
// kubectl-style waits), by its own Compute. It is pure: an object as the API server returns it
// (unstructured) in, the verdicts out. Its tests judge the statuses the operator writes
// (internal/status), and test/integration judges sets read from an API server.
package gitops
