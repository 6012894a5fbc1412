// Package validation checks SidecarSets before the API server stores them. ValidateSidecarSet
// is a pure function from a SidecarSet (and the other SidecarSets already in the cluster) to a
// field.ErrorList with exact paths such as spec.containers[1].name; the validating webhook only
// wraps that list in an Invalid API error. It holds no client and no globals and never mutates
// its inputs.
//
// Beyond what the CRD schema can express, it refuses anything the API server would later refuse
// inside a Pod (so a SidecarSet can never make Pod creation fail), and conflicts between
// SidecarSets that can select the same Pod. Whether two SidecarSets can select the same Pod is
// decided exactly by SetsOverlap, so SidecarSets with disjoint selectors never conflict.
package validation
