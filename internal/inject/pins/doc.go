// Package pins holds, in its test, the literal hashes of the sample and golden SidecarSets, so
// that a change of the API types or of the CRD's defaults that would turn every running pod
// outdated on upgrade fails a test. It is a package of its own so that the engine's tests (and
// its fuzzing) do not build the kubectl plugin it reads SidecarSets with.
package pins
