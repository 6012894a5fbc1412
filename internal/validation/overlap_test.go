package validation

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// matchLabels builds a selector of matchLabels only, from key, value pairs.
func matchLabels(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

// expr builds a selector of matchExpressions only.
func expr(reqs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: reqs}
}

func req(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
}

const (
	in           = metav1.LabelSelectorOpIn
	notIn        = metav1.LabelSelectorOpNotIn
	exists       = metav1.LabelSelectorOpExists
	doesNotExist = metav1.LabelSelectorOpDoesNotExist
)

func TestSelectorsOverlap(t *testing.T) {
	tests := []struct {
		name    string
		a, b    *metav1.LabelSelector
		want    bool
		wantErr string // substring of the error; empty for none
	}{
		{name: "nil and nil", want: true},
		{name: "nil and matchLabels", b: matchLabels("app", "a"), want: true},
		{name: "empty and empty", a: &metav1.LabelSelector{}, b: &metav1.LabelSelector{}, want: true},
		{name: "empty and DoesNotExist", a: &metav1.LabelSelector{}, b: expr(req("app", doesNotExist)), want: true},

		// matchLabels against every operator.
		{name: "matchLabels same value", a: matchLabels("app", "a"), b: matchLabels("app", "a"), want: true},
		{name: "matchLabels different values", a: matchLabels("app", "a"), b: matchLabels("app", "b"), want: false},
		{name: "matchLabels different keys", a: matchLabels("app", "a"), b: matchLabels("env", "prod"), want: true},
		{name: "matchLabels vs In containing it", a: matchLabels("app", "a"), b: expr(req("app", in, "a", "b")), want: true},
		{name: "matchLabels vs In without it", a: matchLabels("app", "a"), b: expr(req("app", in, "b", "c")), want: false},
		{name: "matchLabels vs NotIn containing it", a: matchLabels("app", "a"), b: expr(req("app", notIn, "a")), want: false},
		{name: "matchLabels vs NotIn without it", a: matchLabels("app", "a"), b: expr(req("app", notIn, "b")), want: true},
		{name: "matchLabels vs Exists", a: matchLabels("app", "a"), b: expr(req("app", exists)), want: true},
		{name: "matchLabels vs DoesNotExist", a: matchLabels("app", "a"), b: expr(req("app", doesNotExist)), want: false},

		// In against every operator.
		{name: "In vs In sharing a value", a: expr(req("app", in, "a", "b")), b: expr(req("app", in, "b", "c")), want: true},
		{name: "In vs In disjoint", a: expr(req("app", in, "a")), b: expr(req("app", in, "b")), want: false},
		{name: "In vs NotIn same values", a: expr(req("app", in, "a")), b: expr(req("app", notIn, "a")), want: false},
		{name: "In vs NotIn leaving a value", a: expr(req("app", in, "a", "b")), b: expr(req("app", notIn, "a")), want: true},
		{name: "In vs NotIn covering all", a: expr(req("app", in, "a", "b")), b: expr(req("app", notIn, "b", "a", "c")), want: false},
		{name: "In vs Exists", a: expr(req("app", in, "a")), b: expr(req("app", exists)), want: true},
		{name: "In vs DoesNotExist", a: expr(req("app", in, "a")), b: expr(req("app", doesNotExist)), want: false},

		// NotIn, Exists and DoesNotExist against each other.
		{name: "NotIn vs NotIn", a: expr(req("app", notIn, "a")), b: expr(req("app", notIn, "b")), want: true},
		{name: "NotIn vs Exists", a: expr(req("app", notIn, "a", "b")), b: expr(req("app", exists)), want: true},
		{name: "NotIn vs DoesNotExist", a: expr(req("app", notIn, "a")), b: expr(req("app", doesNotExist)), want: true},
		{name: "Exists vs Exists", a: expr(req("env", exists)), b: expr(req("env", exists)), want: true},
		{name: "Exists vs DoesNotExist", a: expr(req("env", exists)), b: expr(req("env", doesNotExist)), want: false},
		{name: "DoesNotExist vs DoesNotExist", a: expr(req("env", doesNotExist)), b: expr(req("env", doesNotExist)), want: true},

		// Several requirements and keys.
		{name: "three In narrowing to one value", a: expr(req("app", in, "a", "b", "c"), req("app", in, "b", "c")), b: expr(req("app", in, "c", "d")), want: true},
		{name: "three In narrowing to nothing", a: expr(req("app", in, "a", "b"), req("app", in, "b", "c")), b: expr(req("app", in, "a", "c")), want: false},
		{name: "contradictory selector overlaps nothing", a: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}, MatchExpressions: []metav1.LabelSelectorRequirement{req("app", in, "b")}}, want: false},
		{name: "one conflicting key among agreeing ones", a: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}, MatchExpressions: []metav1.LabelSelectorRequirement{req("env", in, "prod")}}, b: expr(req("app", in, "a", "b"), req("env", notIn, "prod")), want: false},
		{name: "agreeing on every key", a: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}, MatchExpressions: []metav1.LabelSelectorRequirement{req("env", exists)}}, b: expr(req("app", in, "a", "b"), req("env", notIn, "prod"), req("tier", doesNotExist)), want: true},

		// Selectors metav1.LabelSelectorAsSelector refuses.
		{name: "unknown operator in a", a: expr(req("app", "Matches", "a")), b: matchLabels("app", "a"), wantErr: "selector 1"},
		{name: "In without values in b", a: matchLabels("app", "a"), b: expr(req("app", in)), wantErr: "selector 2"},
		{name: "Exists with values", a: expr(req("app", exists, "a")), wantErr: "selector 1"},
		{name: "invalid key", a: matchLabels("bad key", "a"), wantErr: "selector 1"},
		{name: "invalid value", b: expr(req("app", notIn, "not a value!")), wantErr: "selector 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SelectorsOverlap(tt.a, tt.b)
			checkOverlap(t, got, err, tt.want, tt.wantErr)
			if tt.wantErr != "" {
				return
			}
			// Overlap is symmetric; checking it doubles every case above.
			swapped, err := SelectorsOverlap(tt.b, tt.a)
			checkOverlap(t, swapped, err, tt.want, "")
		})
	}
}

func checkOverlap(t *testing.T, got bool, err error, want bool, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error = %v, want one containing %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if got != want {
		t.Fatalf("overlap = %v, want %v", got, want)
	}
}

func TestSetsOverlap(t *testing.T) {
	web := matchLabels("app", "web")
	tests := []struct {
		name    string
		a, b    appsv1alpha1.SidecarSetSpec
		want    bool
		wantErr string
	}{
		{name: "same pod selector, no namespace selectors",
			a: appsv1alpha1.SidecarSetSpec{Selector: web}, b: appsv1alpha1.SidecarSetSpec{Selector: web}, want: true},
		{name: "disjoint pod selectors",
			a: appsv1alpha1.SidecarSetSpec{Selector: web}, b: appsv1alpha1.SidecarSetSpec{Selector: matchLabels("app", "db")}, want: false},
		{name: "one namespace selector, the other every namespace",
			a: appsv1alpha1.SidecarSetSpec{Selector: web, NamespaceSelector: matchLabels("team", "a")},
			b: appsv1alpha1.SidecarSetSpec{Selector: web}, want: true},
		{name: "overlapping namespace selectors",
			a: appsv1alpha1.SidecarSetSpec{Selector: web, NamespaceSelector: matchLabels("team", "a")},
			b: appsv1alpha1.SidecarSetSpec{Selector: web, NamespaceSelector: expr(req("team", in, "a", "b"))}, want: true},
		{name: "disjoint namespace selectors",
			a: appsv1alpha1.SidecarSetSpec{Selector: web, NamespaceSelector: matchLabels("team", "a")},
			b: appsv1alpha1.SidecarSetSpec{Selector: web, NamespaceSelector: matchLabels("team", "b")}, want: false},
		{name: "empty namespace selector selects every namespace",
			a: appsv1alpha1.SidecarSetSpec{Selector: web, NamespaceSelector: &metav1.LabelSelector{}},
			b: appsv1alpha1.SidecarSetSpec{Selector: web, NamespaceSelector: matchLabels("team", "b")}, want: true},
		{name: "selector excluding the opt-in label by DoesNotExist",
			a: appsv1alpha1.SidecarSetSpec{Selector: expr(req(appsv1alpha1.InjectLabel, doesNotExist))},
			b: appsv1alpha1.SidecarSetSpec{Selector: web}, want: false},
		{name: "selector excluding the opt-in label by NotIn",
			a: appsv1alpha1.SidecarSetSpec{Selector: expr(req(appsv1alpha1.InjectLabel, notIn, "true"))},
			b: appsv1alpha1.SidecarSetSpec{Selector: web}, want: false},
		{name: "selector requiring another opt-in value",
			a: appsv1alpha1.SidecarSetSpec{Selector: matchLabels(appsv1alpha1.InjectLabel, "false")},
			b: appsv1alpha1.SidecarSetSpec{Selector: web}, want: false},
		{name: "selector allowing the opt-in value among others",
			a: appsv1alpha1.SidecarSetSpec{Selector: expr(req(appsv1alpha1.InjectLabel, in, "true", "false"))},
			b: appsv1alpha1.SidecarSetSpec{Selector: web}, want: true},
		{name: "invalid pod selector",
			a: appsv1alpha1.SidecarSetSpec{Selector: web}, b: appsv1alpha1.SidecarSetSpec{Selector: expr(req("app", in))},
			wantErr: "second SidecarSet: spec.selector is invalid"},
		{name: "invalid namespace selector",
			a: appsv1alpha1.SidecarSetSpec{Selector: web, NamespaceSelector: expr(req("team", "Like", "a"))},
			b: appsv1alpha1.SidecarSetSpec{Selector: web}, wantErr: "first SidecarSet: spec.namespaceSelector is invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := tt.a.DeepCopy(), tt.b.DeepCopy()
			got, err := SetsOverlap(a, b)
			checkOverlap(t, got, err, tt.want, tt.wantErr)
			if tt.wantErr == "" {
				swapped, err := SetsOverlap(b, a)
				checkOverlap(t, swapped, err, tt.want, "")
			}
		})
	}
}
