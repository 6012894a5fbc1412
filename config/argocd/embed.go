// Package argocd holds what Argo CD needs to judge SidecarSets: health.lua, the resource
// health check that `make argocd` writes into the argocd-cm.yaml and argo-cd-values.yaml
// snippets beside it. It is embedded here for the tests that run it (internal/gitops).
package argocd

import _ "embed"

// HealthLua is health.lua, Argo CD's health check for apps.sidecarset.io/SidecarSet.
//
//go:embed health.lua
var HealthLua string
