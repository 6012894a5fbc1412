package validation

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateResources checks a container's requests and limits: no negative quantity, and no
// request above its limit. The request is the field reported, as the API server does: the
// limit is usually the deliberate cap and the request the estimate to adjust.
func validateResources(r corev1.ResourceRequirements, path *field.Path) field.ErrorList {
	errs := validateQuantities(r.Limits, path.Child("limits"))
	errs = append(errs, validateQuantities(r.Requests, path.Child("requests"))...)
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		request := r.Requests[name]
		limit, ok := r.Limits[name]
		if ok && request.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), request.String(), fmt.Sprintf(
				"must be less than or equal to the %s limit of %s; lower the request or raise the limit", name, limit.String())))
		}
	}
	return errs
}

func validateQuantities(list corev1.ResourceList, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(list)) {
		q := list[name]
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Key(string(name)), q.String(),
				"must not be negative; set a quantity of zero or more, such as 100m or 64Mi"))
		}
	}
	return errs
}
