package inject

import "fmt"

// RefusedError is a Pod the engine will not inject because doing so would change or lose
// something the user wrote: a name clash between a sidecar and the Pod, between two
// SidecarSets, or a status annotation it cannot read. The admission webhook denies the Pod with
// its message, which names the SidecarSet, the field and the clash.
type RefusedError struct {
	// Reason says why, as data (see Reason).
	Reason Reason
	// SidecarSet is the SidecarSet that could not be injected; empty when the Pod itself is at
	// fault.
	SidecarSet string
	// Field is the path of the offending field, in the SidecarSet when SidecarSet is set and
	// in the Pod otherwise.
	Field string
	// Detail says what clashes and how to fix it.
	Detail string
}

func (e *RefusedError) Error() string {
	if e.SidecarSet == "" {
		return fmt.Sprintf("pod %s: %s", e.Field, e.Detail)
	}
	return fmt.Sprintf("SidecarSet %q %s: %s", e.SidecarSet, e.Field, e.Detail)
}
