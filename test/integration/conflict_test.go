package integration

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// TestConflictsThatGetPastValidation: two SidecarSets written at the same moment are each
// validated against a view without the other, so both can be stored although they inject the
// same container into the same pods. The reconciler must name the conflict in both statuses
// and the older set must keep injecting, the newer one nothing, so that pods both select are
// injected and not refused.
func TestConflictsThatGetPastValidation(t *testing.T) {
	const tries = 8
	racedCreates, racedUpdates := 0, 0
	for i := range tries {
		t.Run(fmt.Sprintf("create-%d", i), func(t *testing.T) {
			app := fmt.Sprintf("race-create-%d", i)
			a, b := agentSet(app+"-a", app), agentSet(app+"-b", app)
			b.Spec.Containers[0].Name = a.Spec.Containers[0].Name
			errs := concurrently(func() error { return k8s.Create(ctx, a) }, func() error { return k8s.Create(ctx, b) })
			for j, set := range []*appsv1alpha1.SidecarSet{a, b} {
				if errs[j] == nil {
					t.Cleanup(func() { deleteIgnoreNotFound(t, set) })
				}
			}
			if errs[0] != nil || errs[1] != nil {
				return // validation saw the other set: nothing got past it
			}
			racedCreates++
			assertConflictResolved(t, a, b, app)
		})
		t.Run(fmt.Sprintf("update-%d", i), func(t *testing.T) {
			app := fmt.Sprintf("race-update-%d", i)
			a, b := createSet(t, agentSet(app+"-a", app)), createSet(t, agentSet(app+"-b", app))
			for _, set := range []*appsv1alpha1.SidecarSet{a, b} {
				must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), set))
			}
			// Read above, so that the two updates leave together; a conflict with the operator's
			// status writes reads the set again.
			rename := func(set *appsv1alpha1.SidecarSet) func() error {
				return func() error {
					stale := false // read just above
					return retry.RetryOnConflict(retry.DefaultRetry, func() error {
						if stale {
							*set = appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: set.Name}}
							if err := k8s.Get(ctx, client.ObjectKeyFromObject(set), set); err != nil {
								return err
							}
						}
						stale = true
						set.Spec.Containers[0].Name = app + "-shared"
						return k8s.Update(ctx, set)
					})
				}
			}
			errs := concurrently(rename(a), rename(b))
			if errs[0] != nil || errs[1] != nil {
				return
			}
			racedUpdates++
			assertConflictResolved(t, a, b, app)
		})
	}
	t.Logf("pairs that got past validation: %d of %d concurrent creates, %d of %d concurrent updates", racedCreates, tries, racedUpdates, tries)

	// Stored while the validating webhook was down: certain to get past validation, so the
	// resolution is proven even when no race above was won.
	t.Run("written while validation was down", func(t *testing.T) {
		app := "race-down"
		a := createSet(t, agentSet(app+"-a", app))
		b := agentSet(app+"-b", app)
		b.Spec.Containers[0].Name = a.Spec.Containers[0].Name
		withoutSidecarSetValidation(t, func() {
			eventually(t, "the API server to store "+b.Name+" without validating it", func() (bool, string) {
				err := k8s.Create(ctx, b)
				return err == nil, fmt.Sprint(err)
			})
		})
		t.Cleanup(func() { deleteIgnoreNotFound(t, b) })
		older, newer := assertConflictResolved(t, a, b, app)

		// Resolving it (the newer set renames its container) lifts both conditions, and the
		// newer set injects again.
		must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			must(t, k8s.Get(ctx, client.ObjectKeyFromObject(newer), newer))
			newer.Spec.Containers[0].Name = app + "-renamed"
			return k8s.Update(ctx, newer)
		}))
		for _, set := range []*appsv1alpha1.SidecarSet{older, newer} {
			eventually(t, "the Conflict condition of "+set.Name+" to go", func() (bool, string) {
				var got appsv1alpha1.SidecarSet
				must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &got))
				c := meta.FindStatusCondition(got.Status.Conditions, appsv1alpha1.ConditionConflict)
				return c == nil && got.Status.ObservedGeneration == got.Generation, fmt.Sprintf("%+v", c)
			})
		}
		waitForSet(t, newer)
		pod := injectedPod(t, app)
		if want := []string{"app", older.Spec.Containers[0].Name, app + "-renamed"}; !sameNames(containerNames(pod.Spec.Containers), want) {
			t.Errorf("containers = %v, want %v", containerNames(pod.Spec.Containers), want)
		}
	})
}

// concurrently runs the functions at the same moment and returns their errors.
func concurrently(fs ...func() error) []error {
	errs := make([]error, len(fs))
	var start, done sync.WaitGroup
	start.Add(1)
	for i, f := range fs {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			errs[i] = f()
		}()
	}
	start.Done()
	done.Wait()
	return errs
}

// assertConflictResolved waits until both statuses carry the Conflict condition naming the
// other set, the older one (creation time, then name) keeping on and the newer one stopped,
// and checks that a pod both select is admitted with the older set's sidecar only. It returns
// the two sets, older first, as stored.
func assertConflictResolved(t *testing.T, a, b *appsv1alpha1.SidecarSet, app string) (older, newer *appsv1alpha1.SidecarSet) {
	t.Helper()
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(a), a))
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(b), b))
	older, newer = a, b
	if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c < 0 || c == 0 && b.Name < a.Name {
		older, newer = b, a
	}
	for _, side := range []struct {
		set, other *appsv1alpha1.SidecarSet
		reason     string
	}{{newer, older, "StoppedByConflict"}, {older, newer, "ConflictWithNewer"}} {
		eventually(t, fmt.Sprintf("%s to report its conflict with %s", side.set.Name, side.other.Name), func() (bool, string) {
			var got appsv1alpha1.SidecarSet
			must(t, k8s.Get(ctx, client.ObjectKeyFromObject(side.set), &got))
			c := meta.FindStatusCondition(got.Status.Conditions, appsv1alpha1.ConditionConflict)
			ok := c != nil && c.Status == metav1.ConditionTrue && c.Reason == side.reason &&
				strings.Contains(c.Message, fmt.Sprintf("SidecarSet %q", side.other.Name)) && strings.Contains(c.Message, "spec.containers[0].name")
			return ok, fmt.Sprintf("%+v", c)
		})
	}
	waitForSet(t, older)
	waitForSet(t, newer)
	pod := injectedPod(t, app)
	if want := []string{"app", older.Spec.Containers[0].Name}; !sameNames(containerNames(pod.Spec.Containers), want) {
		t.Errorf("containers = %v, want %v (the older set's sidecar only)", containerNames(pod.Spec.Containers), want)
	}
	recs, err := inject.ParseRecords(pod.Annotations)
	must(t, err)
	if names := recs.Names(); !slices.Equal(names, []string{older.Name}) {
		t.Errorf("the pod's record names %v, want only the older set %s", names, older.Name)
	}
	return older, newer
}

// injectedPod creates an opted-in pod labelled app=<app> in a new namespace and returns it as
// stored.
func injectedPod(t *testing.T, app string) *corev1.Pod {
	t.Helper()
	ns := newNamespace(t, nil)
	pod := appPod(ns, app+"-0", app, true)
	must(t, k8s.Create(ctx, pod))
	return getPod(t, pod)
}

func sameNames(got, want []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want)))
}

// sidecarSetValidation reports whether the API server refuses an invalid SidecarSet (a
// container with no image, which only the validating webhook refuses).
func sidecarSetValidation(t *testing.T) bool {
	t.Helper()
	bad := agentSet("validation-probe", "none")
	bad.Spec.Containers[0].Image = ""
	return k8s.Create(ctx, bad, client.DryRunAll) != nil
}

// withoutSidecarSetValidation runs f while the API server does not call the SidecarSet
// validating webhook, as during an outage of the operator with failurePolicy Ignore, or
// before the webhook was installed.
func withoutSidecarSetValidation(t *testing.T, f func()) {
	t.Helper()
	var list admissionregistrationv1.ValidatingWebhookConfigurationList
	must(t, k8s.List(ctx, &list))
	for i := range list.Items {
		cfg := &list.Items[i]
		j := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == "validate.sidecarset.io" })
		if j < 0 {
			continue
		}
		var saved *admissionregistrationv1.ValidatingWebhook
		must(t, testutil.Edit(ctx, k8s, cfg, func(cur *admissionregistrationv1.ValidatingWebhookConfiguration) {
			saved = cur.Webhooks[j].DeepCopy()
			cur.Webhooks = slices.Delete(cur.Webhooks, j, j+1)
		}))
		// The API server reads webhook configurations through an informer: wait until it stops
		// calling the webhook, and after f until it calls it again, so that later tests see
		// the usual chain.
		eventually(t, "the API server to stop calling the validating webhook", func() (bool, string) {
			return !sidecarSetValidation(t), "an invalid SidecarSet is still refused"
		})
		defer func() {
			must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
				var cur admissionregistrationv1.ValidatingWebhookConfiguration
				must(t, k8s.Get(ctx, client.ObjectKeyFromObject(cfg), &cur))
				cur.Webhooks = append(cur.Webhooks, *saved)
				return k8s.Update(ctx, &cur)
			}))
			eventually(t, "the API server to call the validating webhook again", func() (bool, string) {
				return sidecarSetValidation(t), "an invalid SidecarSet was accepted"
			})
		}()
		f()
		return
	}
	t.Fatal("no validating webhook named validate.sidecarset.io is registered")
}
