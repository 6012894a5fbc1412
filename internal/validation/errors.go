package validation

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// duplicate is field.Duplicate with a detail: apimachinery's constructor takes none, and every
// error we return must tell the user how to fix it.
func duplicate(path *field.Path, value any, detail string) *field.Error {
	err := field.Duplicate(path, value)
	err.Detail = detail
	return err
}

// notFound is field.NotFound with a detail, for the same reason as duplicate.
func notFound(path *field.Path, value any, detail string) *field.Error {
	err := field.NotFound(path, value)
	err.Detail = detail
	return err
}

// invalidIf turns the messages of an apimachinery Is* check into one Invalid error (none when
// there are no messages), followed by the hint on how to fix it. One error per field keeps the
// list readable when a value breaks several rules at once.
func invalidIf(path *field.Path, value any, msgs []string, hint string) field.ErrorList {
	if len(msgs) == 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(path, value, strings.Join(msgs, ", ")+"; "+hint)}
}
