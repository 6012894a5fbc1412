package integration

import (
	"math/rand/v2"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/inject/injecttest"
)

// TestValidSetsKeepValidPodsValid is the engine's promise checked by the API server itself: for
// a sample of generated pods and SidecarSets (the fuzz test's generator, fixed seed), whenever
// the pod is valid and every set is valid, the API server accepts each set (dry-run create:
// schema, CEL rules, our validating webhook) and the injected pod (dry-run create through the
// production admission chain and Kubernetes' pod validation).
func TestValidSetsKeepValidPodsValid(t *testing.T) {
	const samples = 400
	ns := newNamespace(t, nil)
	rng := rand.New(rand.NewPCG(20261125, 8))
	texts := []string{"info", "", "eu-west-1", "$(LOG_LEVEL)-debug", "checkout", "$$(REGION)"}
	var valid, refused, injected int
	for i := range samples {
		shape := make([]byte, 16+rng.IntN(96))
		for k := range shape {
			shape[k] = byte(rng.UintN(256))
		}
		in := injecttest.Generate(t, shape, texts[rng.IntN(len(texts))])
		if !injecttest.ValidInput(in) {
			continue
		}
		valid++
		for _, c := range in.Sets {
			set := c.Set.DeepCopy()
			set.ResourceVersion = ""
			if err := k8s.Create(ctx, set, client.DryRunAll); err != nil {
				t.Errorf("sample %d (shape %v): the API server refused SidecarSet %s that our validation accepts: %v",
					i, shape, set.Name, err)
			}
		}
		res, err := inject.Apply(in)
		if err != nil {
			refused++ // a clash between the sets, or with the pod: refused by name, never a broken pod
			continue
		}
		if len(res.Injected) > 0 {
			injected++
		}
		pod := res.Pod()
		pod.Namespace = ns
		// Without the opt-in label the API server does not call our webhook: what it checks is
		// exactly what the engine produced.
		delete(pod.Labels, appsv1alpha1.InjectLabel)
		if err := k8s.Create(ctx, pod, client.DryRunAll); err != nil {
			t.Errorf("sample %d (shape %v): the API server refused the injected pod of a valid pod and valid SidecarSets %v: %v",
				i, shape, res.Injected, err)
		}
	}
	t.Logf("%d samples: %d valid inputs, %d of them injected, %d refused by the engine with a clash", samples, valid, injected, refused)
	// The sample must exercise the promise, not pass vacuously.
	if valid < samples/10 || injected < samples/20 {
		t.Errorf("only %d valid inputs and %d injections in %d samples: the generator no longer exercises injection", valid, injected, samples)
	}
}
