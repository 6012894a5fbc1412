package policy

import (
	"fmt"
	"reflect"
	"strings"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// Form is how policy mode handles a field of a SidecarSet.
type Form string

const (
	// FormCEL: the rendered policy (or its binding) does what the webhook does with the field.
	FormCEL Form = "CEL"
	// FormRouted: a set that uses the field stays on the webhook (the policy routes every pod
	// the set selects to it); Check says so, naming the field.
	FormRouted Form = "Routed"
	// FormNotAdmission: the field is not read at admission (the rollout's, the revision
	// history's); policy mode has nothing to do with it.
	FormNotAdmission Form = "NotAdmission"
)

// FieldRule classifies one field of SidecarSetSpec or of SidecarContainer: whether it is part
// of the set's content (the hash, so a change is a new revision), how policy mode handles it,
// and whether injection reads the pod for it. A field that no rule names keeps its set on the
// webhook (Check): policy mode is deny by default, and TestEveryFieldIsClassified fails until a
// new field is classified here.
type FieldRule struct {
	Hashed   bool
	Form     Form
	ReadsPod bool
	// Why says what the webhook does that the policy does not, for FormRouted.
	Why string
}

// SpecFields are the rules of SidecarSetSpec's fields, by JSON name.
var SpecFields = map[string]FieldRule{
	"selector":          {Form: FormCEL, ReadsPod: true},
	"namespaceSelector": {Form: FormCEL},
	"containers":        {Hashed: true, Form: FormCEL, ReadsPod: true},
	"initContainers":    {Hashed: true, Form: FormCEL, ReadsPod: true},
	"volumes":           {Hashed: true, Form: FormCEL, ReadsPod: true},
	"imagePullSecrets":  {Hashed: true, Form: FormCEL, ReadsPod: true},
	"patchPodMetadata": {Hashed: true, Form: FormRouted, ReadsPod: true, Why: "a policy does not patch annotations " +
		"(the operator's allow-list of keys, MergePatchJson and the pod's record of what was patched are the webhook's): the webhook injects the set"},
	"overrides": {Hashed: true, Form: FormRouted, ReadsPod: true, Why: "a policy does not apply per-pod overrides " +
		"(the pod's annotations checked by the set's rules, a refusal naming the annotation, and the pod's record of the values are the webhook's): the webhook injects the set"},
	// Paused and a pinned revision are rendered (Resolve); a Partial pin is routed (drawn).
	"injectionStrategy":    {Form: FormCEL, ReadsPod: true},
	"updateStrategy":       {Form: FormNotAdmission},
	"revisionHistoryLimit": {Form: FormNotAdmission},
	// The digests are compiled into the containers' images (inject.Compile), which are hashed.
	"imagePolicy": {Form: FormCEL},
	// Pad: the policy routes a pod that sets pod-level resources to the webhook, which pads
	// them; a pod without any needs nothing of it.
	"podResources": {Form: FormCEL, ReadsPod: true},
}

// SidecarFields are the rules of SidecarContainer's own fields, by JSON name; the embedded
// corev1.Container is injected as it is (hashed, CEL), under the name "Container".
var SidecarFields = map[string]FieldRule{
	"Container":               {Hashed: true, Form: FormCEL, ReadsPod: true},
	"podInjectPolicy":         {Hashed: true, Form: FormCEL, ReadsPod: true},
	"shareVolumePolicy":       {Hashed: true, Form: FormCEL, ReadsPod: true},
	"shareVolumeDevicePolicy": {Hashed: true, Form: FormCEL, ReadsPod: true},
	// At most MaxTransfers env vars in all (Check).
	"transferEnv": {Hashed: true, Form: FormCEL, ReadsPod: true},
	"resourcesPolicy": {Hashed: true, Form: FormRouted, ReadsPod: true, Why: "a policy does not compute a sidecar's " +
		"resources from the app containers' (the expressions are the engine's): the webhook injects the set"},
}

// FieldName is the JSON name of a struct field, or its Go name when it is embedded inline.
func FieldName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

// routedField is the first field set uses that keeps it on the webhook: one its rule routes,
// or one no rule classifies (deny by default); nil when there is none.
func routedField(set *appsv1alpha1.SidecarSet) *Unsupported {
	if u := routedIn(reflect.ValueOf(set.Spec), "spec", SpecFields); u != nil {
		return u
	}
	for _, list := range []struct {
		field      string
		containers []appsv1alpha1.SidecarContainer
	}{{"spec.initContainers", set.Spec.InitContainers}, {"spec.containers", set.Spec.Containers}} {
		for i := range list.containers {
			if u := routedIn(reflect.ValueOf(list.containers[i]), fmt.Sprintf("%s[%d]", list.field, i), SidecarFields); u != nil {
				return u
			}
		}
	}
	return nil
}

// routedIn is the first set field of the struct v whose rule routes it, or that has no rule.
func routedIn(v reflect.Value, path string, rules map[string]FieldRule) *Unsupported {
	t := v.Type()
	for i := range t.NumField() {
		if v.Field(i).IsZero() {
			continue
		}
		name := FieldName(t.Field(i))
		rule, ok := rules[name]
		switch {
		case !ok:
			return &Unsupported{Field: path + "." + name, Reason: "policy mode does not know this field yet (no rule classifies it): the webhook injects the set"}
		case rule.Form == FormRouted:
			return &Unsupported{Field: path + "." + name, Reason: rule.Why}
		}
	}
	return nil
}
