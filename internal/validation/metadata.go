package validation

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apimachineryvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

var patchPolicies = []string{string(appsv1alpha1.PatchPolicyRetain), string(appsv1alpha1.PatchPolicyOverwrite), string(appsv1alpha1.PatchPolicyMergePatchJSON)}

// validatePatchPodMetadata checks the annotations a set patches onto pods: valid keys, none of
// the operator's own, each key once, and a JSON object for every MergePatchJson value. Whether
// the operator allows a key is the webhook's to say at injection (a manager flag that a stored
// set cannot know about).
func validatePatchPodMetadata(patches []appsv1alpha1.PatchPodMetadata, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]string{} // key -> where it is patched
	for i := range patches {
		p := &patches[i]
		pp := path.Index(i)
		policy := inject.PolicyOf(p)
		if p.PatchPolicy != "" && !slices.Contains(patchPolicies, string(p.PatchPolicy)) {
			errs = append(errs, field.NotSupported(pp.Child("patchPolicy"), p.PatchPolicy, patchPolicies))
		}
		if len(p.Annotations) == 0 {
			errs = append(errs, field.Required(pp.Child("annotations"), "list the annotations to patch, or remove the entry"))
		}
		for _, k := range sortedKeys(p.Annotations) {
			kp := pp.Child("annotations").Key(k)
			if where, ok := seen[k]; ok {
				errs = append(errs, duplicate(kp, k, fmt.Sprintf("annotation %q is patched by %s too; patch each key once", k, where)))
			}
			seen[k] = kp.String()
			errs = append(errs, invalidIf(kp, k, apimachineryvalidation.IsQualifiedName(k), "use a valid annotation key")...)
			if strings.HasPrefix(k, inject.ReservedKeyPrefix) {
				errs = append(errs, field.Forbidden(kp, fmt.Sprintf("keys under %s are the operator's own; use a key of your own domain", inject.ReservedKeyPrefix)))
			}
			if policy == appsv1alpha1.PatchPolicyMergePatchJSON {
				var obj map[string]any
				if err := json.Unmarshal([]byte(p.Annotations[k]), &obj); err != nil || obj == nil {
					errs = append(errs, field.Invalid(kp, p.Annotations[k],
						"patchPolicy MergePatchJson merges a JSON object into the pod's value: write the value as a JSON object, or use patchPolicy Overwrite"))
				}
			}
		}
	}
	return errs
}

// patchConflicts reports every annotation of ours that the other SidecarSet patches with
// another value or policy: both would write the key of a pod they both select.
func patchConflicts(spec *appsv1alpha1.SidecarSetSpec, other *appsv1alpha1.SidecarSet, path *field.Path) field.ErrorList {
	type patch struct {
		value  string
		policy appsv1alpha1.PatchPolicy
	}
	theirs := map[string]patch{}
	for i := range other.Spec.PatchPodMetadata {
		p := &other.Spec.PatchPodMetadata[i]
		for k, v := range p.Annotations {
			theirs[k] = patch{v, inject.PolicyOf(p)}
		}
	}
	var errs field.ErrorList
	for i := range spec.PatchPodMetadata {
		p := &spec.PatchPodMetadata[i]
		for _, k := range sortedKeys(p.Annotations) {
			if t, ok := theirs[k]; ok && t != (patch{p.Annotations[k], inject.PolicyOf(p)}) {
				errs = append(errs, field.Invalid(path.Index(i).Child("annotations").Key(k), p.Annotations[k], fmt.Sprintf(
					"SidecarSet %q also patches annotation %q (value %q, patchPolicy %s) and both can select the same Pods; give both the same value and policy, patch the key from one set only, or make the selectors of the two SidecarSets disjoint",
					other.Name, k, t.value, t.policy)))
			}
		}
	}
	return errs
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
