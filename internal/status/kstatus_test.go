package status

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// TestReadinessesClassified: every answer of Ready is in this table, with the Reconciling and
// Stalled it gives and what kstatus then says. kstatus reads a True Reconciling or Stalled
// first and, when neither is True, Ready: so a paused rollout (Ready False, neither True) is
// InProgress to kstatus, whatever Reconciling says.
func TestReadinessesClassified(t *testing.T) {
	F, T := metav1.ConditionFalse, metav1.ConditionTrue
	type answer struct {
		r                    readiness
		ready                metav1.ConditionStatus
		reason               string
		reconciling, stalled metav1.ConditionStatus
		kstatus              kstatus.Status
	}
	tests := []answer{
		{readyInjecting, T, "Injecting", F, F, kstatus.CurrentStatus},
		{readyInjectionPaused, T, "InjectionPaused", F, F, kstatus.CurrentStatus},
		{readyRollingUpdatePaused, F, "RollingUpdatePaused", F, F, kstatus.InProgressStatus},
		{readyRollingUpdateProgressing, F, "RollingUpdateProgressing", T, F, kstatus.InProgressStatus},
		{readyResolvingImages, F, "ResolvingImages", T, F, kstatus.InProgressStatus},
		{readyImagesVerifying, F, "ImagesNotVerified", T, F, kstatus.InProgressStatus},
		{readyPolicyPending, F, "PolicyPending", T, F, kstatus.InProgressStatus},
		{readyInvalid, F, "Invalid", F, T, kstatus.FailedStatus},
		{readyStoppedByConflict, F, "StoppedByConflict", F, T, kstatus.FailedStatus},
		{readyPodsNotUpdatable, F, "PodsNotUpdatable", F, T, kstatus.FailedStatus},
		{readyRollingUpdateHalted, F, "RollingUpdateHalted", F, T, kstatus.FailedStatus},
		{readyImagesVerificationFailed, F, "ImagesNotVerified", F, T, kstatus.FailedStatus},
		{readyPolicyNameTaken, F, "PolicyNameTaken", F, T, kstatus.FailedStatus},
	}
	for i, r := range readinesses {
		if slices.Index(readinesses, r) != i {
			t.Errorf("readinesses lists %+v twice", r)
		}
		if !slices.ContainsFunc(tests, func(tc answer) bool { return tc.r == r }) {
			t.Errorf("Ready's answer %+v is not classified in this table", r)
		}
	}
	now := metav1.NewTime(time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC))
	for _, tc := range tests {
		t.Run(tc.reason+"/"+string(tc.reconciling)+string(tc.stalled), func(t *testing.T) {
			if !slices.Contains(readinesses, tc.r) {
				t.Errorf("%+v is not in readinesses", tc.r)
			}
			var conds []metav1.Condition
			setReady(&conds, nil, tc.r, "why", 4, now)
			for _, want := range []struct {
				typ    string
				status metav1.ConditionStatus
			}{{appsv1alpha1.ConditionReady, tc.ready}, {appsv1alpha1.ConditionReconciling, tc.reconciling}, {appsv1alpha1.ConditionStalled, tc.stalled}} {
				c := meta.FindStatusCondition(conds, want.typ)
				if c == nil || c.Status != want.status || c.Reason != tc.reason || c.ObservedGeneration != 4 || !c.LastTransitionTime.Equal(&now) {
					t.Fatalf("%s = %+v; want %s, reason %s, at generation 4", want.typ, c, want.status, tc.reason)
				}
				// Ready, and a True Reconciling or Stalled, carry Ready's message; a False one
				// says where to look.
				if (want.typ == appsv1alpha1.ConditionReady || c.Status == metav1.ConditionTrue) != (c.Message == "why") || c.Message == "" {
					t.Errorf("%s %s has message %q", want.typ, c.Status, c.Message)
				}
			}
			set := &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "mesh", Generation: 4}}
			set.SetGroupVersionKind(appsv1alpha1.GroupVersion.WithKind("SidecarSet"))
			set.Status = appsv1alpha1.SidecarSetStatus{ObservedGeneration: 4, Conditions: conds}
			raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(set)
			if err != nil {
				t.Fatal(err)
			}
			res, err := kstatus.Compute(&unstructured.Unstructured{Object: raw})
			if err != nil || res.Status != tc.kstatus {
				t.Errorf("kstatus = %+v, %v; want %s", res, err, tc.kstatus)
			}
		})
	}
}

// TestSetReadyTransitions: each of Ready, Reconciling and Stalled keeps its transition time
// from the previous status while its status stays, gets now when it changes, and keeps its
// place in the list.
func TestSetReadyTransitions(t *testing.T) {
	then, now := metav1.NewTime(time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)), metav1.NewTime(time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC))
	var previous []metav1.Condition
	setReady(&previous, nil, readyRollingUpdateProgressing, "rolling", 2, then)
	previous = append([]metav1.Condition{{Type: "Other", Status: metav1.ConditionTrue, Reason: "Mine", LastTransitionTime: then}}, previous...)
	conds := slices.Clone(previous)
	setReady(&conds, previous, readyPodsNotUpdatable, "stuck", 3, now)
	var types []string
	for _, c := range conds {
		types = append(types, c.Type)
	}
	if want := []string{"Other", appsv1alpha1.ConditionReady, appsv1alpha1.ConditionReconciling, appsv1alpha1.ConditionStalled}; !slices.Equal(types, want) {
		t.Errorf("conditions %v, want %v", types, want)
	}
	for typ, since := range map[string]metav1.Time{
		appsv1alpha1.ConditionReady:       then, // False -> False
		appsv1alpha1.ConditionReconciling: now,  // True -> False
		appsv1alpha1.ConditionStalled:     now,  // False -> True
	} {
		if c := meta.FindStatusCondition(conds, typ); c == nil || !c.LastTransitionTime.Equal(&since) || c.ObservedGeneration != 3 {
			t.Errorf("%s = %+v; want transition at %s, generation 3", typ, c, since)
		}
	}
}

// TestReadyIsWrittenOnlyBySetReady reads this package's source: every answer of Ready is a
// readiness listed in readinesses (an unkeyed literal, so that its progress is written), and
// no code but setReady builds a Ready, Reconciling or Stalled condition. A new reason of Ready
// written any other way fails here.
func TestReadyIsWrittenOnlyBySetReady(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	literals := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, _ := decl.(*ast.FuncDecl)
			ast.Inspect(decl, func(n ast.Node) bool {
				lit, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				if id, ok := lit.Type.(*ast.Ident); ok && id.Name == "readiness" {
					literals++
					if len(lit.Elts) != 3 || slices.ContainsFunc(lit.Elts, func(e ast.Expr) bool { _, kv := e.(*ast.KeyValueExpr); return kv }) {
						t.Errorf("%s: a readiness literal must be unkeyed, with its progress", fset.Position(lit.Pos()))
					}
				}
				if typ := conditionType(lit); typ != "" && (fn == nil || fn.Name.Name != "setReady") {
					t.Errorf("%s: a %s condition built outside setReady", fset.Position(lit.Pos()), typ)
				}
				return true
			})
		}
	}
	if literals != len(readinesses) {
		t.Errorf("%d readiness literals in the source, %d in readinesses: list every answer of Ready there", literals, len(readinesses))
	}
}

// conditionType is the type of a metav1.Condition literal when it is Ready, Reconciling or
// Stalled, by the name of its constant; "" otherwise.
func conditionType(lit *ast.CompositeLit) string {
	sel, ok := lit.Type.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Condition" {
		return ""
	}
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if key, _ := kv.Key.(*ast.Ident); !ok || key == nil || key.Name != "Type" {
			continue
		}
		if v, ok := kv.Value.(*ast.SelectorExpr); ok {
			switch v.Sel.Name {
			case "ConditionReady", "ConditionReconciling", "ConditionStalled":
				return v.Sel.Name
			}
		}
	}
	return ""
}
