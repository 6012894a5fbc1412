// Package podrules is Kubernetes' own Pod defaulting and validation, as the API server applies
// them, for the rest of the operator to use on Pods that exist only in memory: the synthetic Pod
// a SidecarSet validates as, the definitions the engine compares, and the sidecars it judges
// against the namespace's LimitRanges as the LimitRanger admission plugin will.
//
// It wraps k8s.io/kubernetes (pkg/apis/core/v1 defaulting and conversion, pkg/apis/core/validation,
// plugin/pkg/admission/limitranger) instead of re-implementing any rule, so the operator follows
// the Kubernetes release it is built against, feature gates at their defaults for that release. Everything is pure: no client, no
// globals of ours, and inputs are never modified.
package podrules
