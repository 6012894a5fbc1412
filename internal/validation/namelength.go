package validation

import (
	"fmt"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxNameLength is the longest SidecarSet name: the name is a label value on the set's
// revisions and, in policy mode, on its admission policy and binding, and label values are at
// most 63 characters. The CRD refuses longer names at create too (a rule on the SidecarSet
// type), so they are refused while the validating webhook is down.
const MaxNameLength = utilvalidation.LabelValueMaxLength

// validateNameLength refuses a SidecarSet name too long to be a label value.
func validateNameLength(name string, path *field.Path) field.ErrorList {
	if len(name) <= MaxNameLength {
		return nil
	}
	return field.ErrorList{field.Invalid(path, name, fmt.Sprintf(
		"a SidecarSet name is at most %d characters, this one has %d (the name labels the set's revisions and policies); choose a shorter name",
		MaxNameLength, len(name)))}
}
