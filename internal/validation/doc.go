// Package validation checks SidecarSets before the API server stores them. ValidateSidecarSet
// is a pure function from a SidecarSet (and the other SidecarSets already in the cluster) to a
// field.ErrorList with exact paths such as spec.containers[1].name; the validating webhook only
// wraps that list in an Invalid API error. It holds no client and no globals and never mutates
// its inputs.
//
// Beyond what the CRD schema can express, it refuses anything the API server would later refuse
// inside a Pod, and conflicts between SidecarSets that can select the same Pod. Two passes: the
// SidecarSet's own checks (names, selectors, transferEnv, shareVolumePolicy and the common
// container mistakes, with messages that say how to fix them), then, when those find nothing,
// Kubernetes' own pod validation (internal/podrules: k8s.io/kubernetes/pkg/apis/core/validation)
// on a synthetic pod holding the set's containers, init containers, volumes and pull secrets
// (as the admission plugins every cluster runs leave a pod: a ServiceAccount named),
// with every error's path mapped back to the field the user wrote. The second pass is what
// makes "the API server would accept the pod" true; the first only words the common cases
// better (validationtest.Corpus and the integration test TestValidationCorpus prove both).
//
// Whether two SidecarSets can select the same Pod is decided exactly by SetsOverlap, so
// SidecarSets with disjoint selectors never conflict.
package validation
