package validation

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// maxWeight bounds updateStrategy.priorityStrategy.weightPriority[].weight, as OpenKruise does.
const maxWeight = 100

// validatePriorityStrategy checks spec.updateStrategy.priorityStrategy: one of weightPriority
// and orderPriority; weights from 0 to 100 with a valid, non-empty selector; ordered keys
// that are label keys, each once.
func validatePriorityStrategy(s *appsv1alpha1.UpdatePriorityStrategy, path *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	if len(s.WeightPriority) > 0 && len(s.OrderPriority) > 0 {
		errs = append(errs, field.Forbidden(path.Child("orderPriority"),
			"weightPriority is set too: rank the pods either by weights or by ordered keys; remove one of the two lists"))
	}
	for i, w := range s.WeightPriority {
		p := path.Child("weightPriority").Index(i)
		if w.Weight < 0 || w.Weight > maxWeight {
			errs = append(errs, field.Invalid(p.Child("weight"), w.Weight, fmt.Sprintf("must be from 0 to %d", maxWeight)))
		}
		errs = append(errs, validateWeightSelector(&w.MatchSelector, p.Child("matchSelector"))...)
	}
	seen := sets.New[string]()
	for i, o := range s.OrderPriority {
		p := path.Child("orderPriority").Index(i).Child("orderedKey")
		switch {
		case o.OrderedKey == "":
			errs = append(errs, field.Required(p, "set the label key whose value ranks the pods, such as \"apps.kubernetes.io/pod-index\""))
		case seen.Has(o.OrderedKey):
			errs = append(errs, duplicate(p, o.OrderedKey, fmt.Sprintf("label key %q is listed twice; remove one of the entries", o.OrderedKey)))
		default:
			errs = append(errs, invalidIf(p, o.OrderedKey, utilvalidation.IsQualifiedName(o.OrderedKey),
				"name a label key, such as \"apps.kubernetes.io/pod-index\"")...)
		}
		seen.Insert(o.OrderedKey)
	}
	return errs
}

// validateWeightSelector checks a weight's selector: valid and not empty (an empty selector
// would add its weight to every pod, which changes no order).
func validateWeightSelector(sel *metav1.LabelSelector, path *field.Path) field.ErrorList {
	if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		return field.ErrorList{field.Required(path,
			"select the pods that get this weight, such as matchLabels: {zone: a}; an empty selector matches every pod and changes no order")}
	}
	return metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, path)
}

// validateScatterStrategy checks spec.updateStrategy.scatterStrategy: each term a label key
// and a label value (or "*"), each term once.
func validateScatterStrategy(terms []appsv1alpha1.UpdateScatterTerm, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[appsv1alpha1.UpdateScatterTerm]()
	for i, t := range terms {
		p := path.Index(i)
		if seen.Has(t) {
			errs = append(errs, duplicate(p, t.Key+"="+t.Value, fmt.Sprintf("%s=%s is listed twice; remove one of the entries", t.Key, t.Value)))
		}
		seen.Insert(t)
		if t.Key == "" {
			errs = append(errs, field.Required(p.Child("key"), "set the label key of the pods to spread, such as \"topology.kubernetes.io/zone\""))
		} else {
			errs = append(errs, invalidIf(p.Child("key"), t.Key, utilvalidation.IsQualifiedName(t.Key),
				"name a label key, such as \"topology.kubernetes.io/zone\"")...)
		}
		switch t.Value {
		case "":
			// A pod without the label would not match an empty value: say which pods.
			errs = append(errs, field.Required(p.Child("value"), "set the label value of the pods to spread, or \"*\" to spread the pods of each value"))
		case "*":
		default:
			errs = append(errs, invalidIf(p.Child("value"), t.Value, utilvalidation.IsValidLabelValue(t.Value),
				"set a label value, or \"*\" to spread the pods of each value")...)
		}
	}
	return errs
}
