package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	appsvalidation "k8s.io/kubernetes/pkg/apis/apps/validation"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// ValidateSidecarSet returns everything wrong with a SidecarSet, each error with the exact path
// of the offending field and a message saying how to fix it. others are the SidecarSets that
// already exist; the one named like set (its stored version, on update) is skipped. set must
// not be nil; neither set nor others is modified.
//
// Conflicts with others are only checked when set's own selectors are valid: with a missing or
// broken selector there is no telling which Pods it would select.
func ValidateSidecarSet(set *appsv1alpha1.SidecarSet, others []appsv1alpha1.SidecarSet) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateName(set.Name, field.NewPath("metadata", "name"))
	selectorErrs := validateSelectors(&set.Spec, spec)
	errs = append(errs, selectorErrs...)
	errs = append(errs, validateSpec(&set.Spec, spec)...)
	if len(selectorErrs) == 0 {
		errs = append(errs, validateConflicts(set, others, spec)...)
	}
	return errs
}

// validateName checks the name of a cluster-scoped object: a DNS-1123 subdomain.
func validateName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "set a name: lowercase letters, digits, '-' and '.'")}
	}
	if errs := invalidIf(path, name, apimachineryvalidation.NameIsDNSSubdomain(name, false),
		"choose a name such as \"log-agent\""); len(errs) > 0 {
		return errs
	}
	return validateNameLength(name, path)
}

// validateSelectors checks spec.selector (required, valid, not empty) and
// spec.namespaceSelector (valid when set; empty selects every namespace).
func validateSelectors(spec *appsv1alpha1.SidecarSetSpec, path *field.Path) field.ErrorList {
	opts := metav1validation.LabelSelectorValidationOptions{}
	errs := metav1validation.ValidateLabelSelector(spec.NamespaceSelector, opts, path.Child("namespaceSelector"))
	selPath := path.Child("selector")
	sel := spec.Selector
	switch {
	case sel == nil:
		return append(field.ErrorList{field.Required(selPath,
			"set a selector for the Pods to inject into, such as matchLabels: {app: web}")}, errs...)
	case len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0:
		// An empty selector would inject into every opted-in Pod of the cluster; that is
		// never what a user means, so it has to be spelled out.
		return append(field.ErrorList{field.Invalid(selPath, sel,
			"an empty selector would select every opted-in Pod; add at least one matchLabels entry or matchExpressions requirement")}, errs...)
	}
	errs = append(errs, reservedSelectorKeys(sel, selPath)...)
	return append(metav1validation.ValidateLabelSelector(sel, opts, selPath), errs...)
}

// reservedSelectorKeys refuses a selector on the route label (sidecarset.io/webhook): in policy
// mode the policies add it to the pods they send to the webhook, which removes it, so a set
// selecting on it would select different pods in each mode.
func reservedSelectorKeys(sel *metav1.LabelSelector, path *field.Path) field.ErrorList {
	const why = "is the operator's route label in policy mode, added to pods during admission and removed before they are stored: select pods by their own labels"
	var errs field.ErrorList
	if _, ok := sel.MatchLabels[appsv1alpha1.WebhookRouteLabel]; ok {
		errs = append(errs, field.Invalid(path.Child("matchLabels").Key(appsv1alpha1.WebhookRouteLabel), appsv1alpha1.WebhookRouteLabel, appsv1alpha1.WebhookRouteLabel+" "+why))
	}
	for i, r := range sel.MatchExpressions {
		if r.Key == appsv1alpha1.WebhookRouteLabel {
			errs = append(errs, field.Invalid(path.Child("matchExpressions").Index(i).Child("key"), r.Key, r.Key+" "+why))
		}
	}
	return errs
}

// validateSpec checks everything in the spec that does not depend on other SidecarSets.
func validateSpec(spec *appsv1alpha1.SidecarSetSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Containers) == 0 && len(spec.InitContainers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"),
			"declare at least one entry in spec.containers or spec.initContainers: a SidecarSet must inject a container"))
	}
	errs = append(errs, validateVolumes(spec.Volumes, path.Child("volumes"))...)
	errs = append(errs, validateContainers(spec, path)...)
	errs = append(errs, validatePullSecrets(spec.ImagePullSecrets, path.Child("imagePullSecrets"))...)
	errs = append(errs, validatePatchPodMetadata(spec.PatchPodMetadata, path.Child("patchPodMetadata"))...)
	errs = append(errs, validateOverrides(spec, path.Child("overrides"))...)
	errs = append(errs, validateAsPod(spec, path, errs)...)
	return append(errs, validateUpdateStrategy(&spec.UpdateStrategy, path.Child("updateStrategy"))...)
}

// validatePullSecrets checks that every image pull secret names a Secret, once. A name must be
// one a Secret can have (a DNS subdomain): the API server takes any string in a pod's
// imagePullSecrets, but no Secret of another name exists, so the kubelet could never pull with
// it, and the name is written into every injected pod and its record.
func validatePullSecrets(refs []corev1.LocalObjectReference, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, ref := range refs {
		p := path.Index(i).Child("name")
		switch {
		case ref.Name == "":
			errs = append(errs, field.Required(p, "set the name of a Secret of type kubernetes.io/dockerconfigjson, or remove the entry"))
		case seen.Has(ref.Name):
			errs = append(errs, duplicate(p, ref.Name, fmt.Sprintf("Secret %q is listed twice; remove one of the entries", ref.Name)))
		default:
			errs = append(errs, invalidIf(p, ref.Name, apimachineryvalidation.NameIsDNSSubdomain(ref.Name, false),
				"name a Secret of type kubernetes.io/dockerconfigjson, such as \"registry-credentials\"")...)
		}
		seen.Insert(ref.Name)
	}
	return errs
}

// validateUpdateStrategy checks spec.updateStrategy with the rules Kubernetes applies to a
// Deployment's rolling update: partition and maxUnavailable are non-negative numbers or
// percentages up to 100%; maxUnavailable is not zero. The selector must be valid, and so must
// the priority and scatter strategies.
func validateUpdateStrategy(s *appsv1alpha1.UpdateStrategy, path *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, path.Child("selector"))
	errs = append(errs, validatePriorityStrategy(s.PriorityStrategy, path.Child("priorityStrategy"))...)
	errs = append(errs, validateScatterStrategy(s.ScatterStrategy, path.Child("scatterStrategy"))...)
	for _, f := range []struct {
		name string
		v    *intstr.IntOrString
	}{{"partition", s.Partition}, {"maxUnavailable", s.MaxUnavailable}} {
		if f.v == nil {
			continue
		}
		p := path.Child(f.name)
		errs = append(errs, appsvalidation.ValidatePositiveIntOrPercent(*f.v, p)...)
		errs = append(errs, appsvalidation.IsNotMoreThan100Percent(*f.v, p)...)
	}
	if mu := s.MaxUnavailable; mu != nil && (mu.Type == intstr.Int && mu.IntVal == 0 || mu.Type == intstr.String && mu.StrVal == "0%") {
		errs = append(errs, field.Invalid(path.Child("maxUnavailable"), mu.String(),
			"must be at least 1 (or a percentage above 0%), or no Pod could ever be updated"))
	}
	return errs
}
