package validation

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// wantErr is one expected error: its exact path and type.
type wantErr struct {
	path string
	typ  field.ErrorType
}

// validationCase changes a fresh validSidecarSet and states exactly which errors that causes.
type validationCase struct {
	name   string
	mutate func(s *appsv1alpha1.SidecarSet) // nil: the valid SidecarSet as it is
	others []appsv1alpha1.SidecarSet
	want   []wantErr // nil: no error at all
	detail string    // when set, every error's message must contain it
}

// runCases runs ValidateSidecarSet on each case. Besides the exact errors, it checks that every
// error says something beyond its type (how to fix it) and that no input was modified.
func runCases(t *testing.T, cases []validationCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := validSidecarSet()
			if tc.mutate != nil {
				tc.mutate(set)
			}
			setBefore := set.DeepCopy()
			othersBefore := deepCopySets(tc.others)

			errs := ValidateSidecarSet(set, tc.others)

			checkErrors(t, errs, tc.want)
			for _, err := range errs {
				if err.Detail == "" || !strings.Contains(err.Detail, tc.detail) {
					t.Errorf("%s: message %q should say how to fix it and contain %q", err.Field, err.Detail, tc.detail)
				}
			}
			if !equality.Semantic.DeepEqual(set, setBefore) || !equality.Semantic.DeepEqual(tc.others, othersBefore) {
				t.Errorf("ValidateSidecarSet modified its inputs")
			}
		})
	}
}

// checkErrors compares errors as a multiset of (type, path): the order they come in is not
// part of the contract.
func checkErrors(t *testing.T, errs field.ErrorList, want []wantErr) {
	t.Helper()
	got := make([]string, 0, len(errs))
	for _, err := range errs {
		got = append(got, string(err.Type)+" "+err.Field)
	}
	wanted := make([]string, 0, len(want))
	for _, w := range want {
		wanted = append(wanted, string(w.typ)+" "+w.path)
	}
	slices.Sort(got)
	slices.Sort(wanted)
	if !slices.Equal(got, wanted) {
		t.Errorf("errors:\n  got  %q\n  want %q\nfull errors: %v", got, wanted, errs.ToAggregate())
	}
}

func deepCopySets(sets []appsv1alpha1.SidecarSet) []appsv1alpha1.SidecarSet {
	if sets == nil {
		return nil
	}
	out := make([]appsv1alpha1.SidecarSet, len(sets))
	for i := range sets {
		sets[i].DeepCopyInto(&out[i])
	}
	return out
}

func TestValidateSidecarSetMetadataAndSelectors(t *testing.T) {
	runCases(t, []validationCase{
		{name: "realistic log agent and native sidecar proxy are valid"},
		{name: "init containers alone are enough", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers = nil
		}},
		{name: "containers alone are enough", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers = nil
		}},
		{name: "neither containers nor init containers", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers, s.Spec.InitContainers = nil, nil
		}, want: []wantErr{{"spec.containers", field.ErrorTypeRequired}}, detail: "spec.initContainers"},
		{name: "name with dots is a valid subdomain", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Name = "observability.example.com"
		}},
		{name: "name missing", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Name = ""
		}, want: []wantErr{{"metadata.name", field.ErrorTypeRequired}}},
		{name: "name not a DNS subdomain", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Name = "Observability_1"
		}, want: []wantErr{{"metadata.name", field.ErrorTypeInvalid}}},
		{name: "selector missing", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Selector = nil
		}, want: []wantErr{{"spec.selector", field.ErrorTypeRequired}}},
		{name: "selector empty", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Selector = &metav1.LabelSelector{}
		}, want: []wantErr{{"spec.selector", field.ErrorTypeInvalid}}, detail: "matchExpressions"},
		{name: "selector matchLabels key invalid", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Selector.MatchLabels["bad key"] = "shop"
		}, want: []wantErr{{"spec.selector.matchLabels", field.ErrorTypeInvalid}}},
		{name: "selector In without values", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Selector.MatchExpressions[0].Values = nil
		}, want: []wantErr{{"spec.selector.matchExpressions[0].values", field.ErrorTypeRequired}}},
		{name: "selector operator unknown", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Selector.MatchExpressions = append(s.Spec.Selector.MatchExpressions,
				metav1.LabelSelectorRequirement{Key: "env", Operator: "Like", Values: []string{"prod"}})
		}, want: []wantErr{{"spec.selector.matchExpressions[1].operator", field.ErrorTypeInvalid}}},
		{name: "selector on the route label", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Selector.MatchLabels[appsv1alpha1.WebhookRouteLabel] = appsv1alpha1.WebhookRouteValue
		}, want: []wantErr{{"spec.selector.matchLabels[sidecarset.io/webhook]", field.ErrorTypeInvalid}}, detail: "route label"},
		{name: "selector expression on the route label", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Selector.MatchExpressions = append(s.Spec.Selector.MatchExpressions,
				metav1.LabelSelectorRequirement{Key: appsv1alpha1.WebhookRouteLabel, Operator: metav1.LabelSelectorOpDoesNotExist})
		}, want: []wantErr{{"spec.selector.matchExpressions[1].key", field.ErrorTypeInvalid}}, detail: "select pods by their own labels"},
		{name: "namespace selector Exists with values", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.NamespaceSelector = expr(req("mesh", exists, "enabled"))
		}, want: []wantErr{{"spec.namespaceSelector.matchExpressions[0].values", field.ErrorTypeForbidden}}},
		{name: "namespace selector empty selects every namespace", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.NamespaceSelector = &metav1.LabelSelector{}
		}},
		{name: "namespace selector unset", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.NamespaceSelector = nil
		}},
		{name: "image pull secret without name", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.ImagePullSecrets[0].Name = ""
		}, want: []wantErr{{"spec.imagePullSecrets[0].name", field.ErrorTypeRequired}}},
		{name: "image pull secret listed twice", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.ImagePullSecrets = append(s.Spec.ImagePullSecrets, s.Spec.ImagePullSecrets[0])
		}, want: []wantErr{{"spec.imagePullSecrets[1].name", field.ErrorTypeDuplicate}}, detail: "registry-credentials"},
		{name: "image pull secret name with a quote", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.ImagePullSecrets[0].Name = `a"b`
		}, want: []wantErr{{"spec.imagePullSecrets[0].name", field.ErrorTypeInvalid}}, detail: "Secret"},
		{name: "image pull secret name breaking out of a JSON string", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.ImagePullSecrets = append(s.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: `s","evil`})
		}, want: []wantErr{{"spec.imagePullSecrets[1].name", field.ErrorTypeInvalid}}, detail: "RFC 1123 subdomain"},
		{name: "image pull secret name in capitals", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.ImagePullSecrets[0].Name = "Registry"
		}, want: []wantErr{{"spec.imagePullSecrets[0].name", field.ErrorTypeInvalid}}},
		{name: "image pull secret name with dots", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.ImagePullSecrets[0].Name = "registry.example.com"
		}},
		{name: "rolling update with partition and maxUnavailable", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy = appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate,
				Partition: ptr.To(intstr.FromString("20%")), MaxUnavailable: ptr.To(intstr.FromInt32(3)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}}
		}},
		{name: "maxUnavailable zero", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromString("0%"))
		}, want: []wantErr{{"spec.updateStrategy.maxUnavailable", field.ErrorTypeInvalid}}, detail: "at least 1"},
		{name: "partition above 100%", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("120%"))
		}, want: []wantErr{{"spec.updateStrategy.partition", field.ErrorTypeInvalid}}},
		{name: "partition negative", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromInt32(-2))
		}, want: []wantErr{{"spec.updateStrategy.partition", field.ErrorTypeInvalid}}},
		{name: "update selector operator unknown", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.Selector = expr(metav1.LabelSelectorRequirement{Key: "canary", Operator: "Like"})
		}, want: []wantErr{{"spec.updateStrategy.selector.matchExpressions[0].operator", field.ErrorTypeInvalid}}},
		{name: "priority by weights, scattered by zone", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.PriorityStrategy = &appsv1alpha1.UpdatePriorityStrategy{WeightPriority: []appsv1alpha1.UpdatePriorityWeightTerm{
				weightTerm(0, "tier", "canary"), weightTerm(100, "zone", "a")}}
			s.Spec.UpdateStrategy.ScatterStrategy = []appsv1alpha1.UpdateScatterTerm{{Key: "topology.kubernetes.io/zone", Value: "*"}, {Key: "app", Value: "web"}}
		}},
		{name: "priority by ordered keys", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.PriorityStrategy = &appsv1alpha1.UpdatePriorityStrategy{OrderPriority: []appsv1alpha1.UpdatePriorityOrderTerm{
				{OrderedKey: "apps.kubernetes.io/pod-index"}, {OrderedKey: "ordinal"}}}
		}},
		{name: "priority by weights and by ordered keys", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.PriorityStrategy = &appsv1alpha1.UpdatePriorityStrategy{WeightPriority: []appsv1alpha1.UpdatePriorityWeightTerm{weightTerm(1, "zone", "a")},
				OrderPriority: []appsv1alpha1.UpdatePriorityOrderTerm{{OrderedKey: "ordinal"}}}
		}, want: []wantErr{{"spec.updateStrategy.priorityStrategy.orderPriority", field.ErrorTypeForbidden}}, detail: "weightPriority"},
		{name: "weights out of range", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.PriorityStrategy = &appsv1alpha1.UpdatePriorityStrategy{WeightPriority: []appsv1alpha1.UpdatePriorityWeightTerm{
				weightTerm(101, "zone", "a"), weightTerm(-1, "zone", "b")}}
		}, want: []wantErr{{"spec.updateStrategy.priorityStrategy.weightPriority[0].weight", field.ErrorTypeInvalid},
			{"spec.updateStrategy.priorityStrategy.weightPriority[1].weight", field.ErrorTypeInvalid}}, detail: "from 0 to 100"},
		{name: "weight with an empty selector", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.PriorityStrategy = &appsv1alpha1.UpdatePriorityStrategy{WeightPriority: []appsv1alpha1.UpdatePriorityWeightTerm{{Weight: 10}}}
		}, want: []wantErr{{"spec.updateStrategy.priorityStrategy.weightPriority[0].matchSelector", field.ErrorTypeRequired}}, detail: "every pod"},
		{name: "weight with a broken selector", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.PriorityStrategy = &appsv1alpha1.UpdatePriorityStrategy{WeightPriority: []appsv1alpha1.UpdatePriorityWeightTerm{{Weight: 10,
				MatchSelector: *expr(metav1.LabelSelectorRequirement{Key: "zone", Operator: "Like"})}}}
		}, want: []wantErr{{"spec.updateStrategy.priorityStrategy.weightPriority[0].matchSelector.matchExpressions[0].operator", field.ErrorTypeInvalid}}},
		{name: "ordered keys missing, broken, twice", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.PriorityStrategy = &appsv1alpha1.UpdatePriorityStrategy{OrderPriority: []appsv1alpha1.UpdatePriorityOrderTerm{
				{}, {OrderedKey: "not a key"}, {OrderedKey: "ordinal"}, {OrderedKey: "ordinal"}}}
		}, want: []wantErr{{"spec.updateStrategy.priorityStrategy.orderPriority[0].orderedKey", field.ErrorTypeRequired},
			{"spec.updateStrategy.priorityStrategy.orderPriority[1].orderedKey", field.ErrorTypeInvalid},
			{"spec.updateStrategy.priorityStrategy.orderPriority[3].orderedKey", field.ErrorTypeDuplicate}}, detail: "key"},
		{name: "scatter terms missing, broken, twice", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.ScatterStrategy = []appsv1alpha1.UpdateScatterTerm{{Value: "a"}, {Key: "zone"}, {Key: "zone", Value: "not a value"},
				{Key: "zone", Value: "*"}, {Key: "zone", Value: "*"}}
		}, want: []wantErr{{"spec.updateStrategy.scatterStrategy[0].key", field.ErrorTypeRequired},
			{"spec.updateStrategy.scatterStrategy[1].value", field.ErrorTypeRequired},
			{"spec.updateStrategy.scatterStrategy[2].value", field.ErrorTypeInvalid},
			{"spec.updateStrategy.scatterStrategy[4]", field.ErrorTypeDuplicate}}},
	})
}

func weightTerm(w int32, key, value string) appsv1alpha1.UpdatePriorityWeightTerm {
	return appsv1alpha1.UpdatePriorityWeightTerm{Weight: w, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{key: value}}}
}
