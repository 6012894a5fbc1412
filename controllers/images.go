package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	kauth "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/eventcatalog"
	"github.com/sidecarset/sidecarset-operator/internal/images"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// ImageResolver pins the images of each SidecarSet with imagePolicy.pin Digest: it reads the
// digest each tag names from its registry and writes it into status.images, which every
// replica's webhook, the status and the rollout compile the set with (inject.Compile). It runs
// on the leader, with backoff while a registry fails, and never in an admission: a registry
// that is down delays a set's new images, never a pod. A pinned image stays pinned until the
// set's images are refreshed (the sidecarset.io/refresh-images annotation); meanwhile the
// tags are read again every Recheck, and a tag that moved is reported (status.images[].latest,
// the ImagesPinned condition, an ImageTagMoved event).
type ImageResolver struct {
	// Client reads SidecarSets from the manager's cache and writes their status.
	Client client.Client
	// Secrets reads the pull secrets the sets name, in Namespace, from the API server: the
	// operator caches no Secrets.
	Secrets client.Reader
	// Namespace is the operator's namespace, where the pull secrets are.
	Namespace string
	// Resolver reads digests from the registries.
	Resolver *images.Resolver
	// Recorder records the ImageResolutionFailed and ImageTagMoved events.
	Recorder events.EventRecorder
	// Recheck is how often a pinned set's tags are read again; 10 minutes when zero.
	Recheck time.Duration
}

// +kubebuilder:rbac:groups="",namespace=sidecarset-system,resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",namespace=sidecarset-system,resources=configmaps,verbs=get

// Reconcile resolves the set's images, verifies the signatures of digests newly pinned when the
// set asks (imagePolicy.verify), and writes status.images when it changed.
func (r *ImageResolver) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var set appsv1alpha1.SidecarSet
	if err := r.Client.Get(ctx, req.NamespacedName, &set); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// A budget for the registries: one that answers slowly holds this worker for so long, not
	// for every image of the set in turn.
	registries, cancel := context.WithTimeout(ctx, registryBudget)
	defer cancel()
	updated := set.DeepCopy()
	var failed []error
	if !inject.PinsDigests(&set) {
		updated.Status.Images, updated.Status.ImagesRefreshed = nil, ""
	} else {
		wanted := inject.ImagesToPin(&set)
		keychain, err := r.keychain(ctx, &set)
		results := make([]images.Result, len(wanted))
		for i, image := range wanted {
			switch d := inject.DigestOf(image); {
			case d != "":
				results[i].Digest = d // named by digest: pinned already, verified all the same
			case err != nil:
				results[i].Err = err
			default:
				results[i].Digest, results[i].Err = r.Resolver.Digest(registries, image, keychain)
			}
		}
		token := set.Annotations[appsv1alpha1.RefreshImagesAnnotation]
		refresh := token != "" && token != set.Status.ImagesRefreshed
		next, refreshed := images.Next(wanted, results, set.Status.Images, refresh, metav1.Now())
		updated.Status.Images = next
		if refresh && refreshed {
			updated.Status.ImagesRefreshed = token
		}
		for _, res := range results {
			if res.Err != nil {
				failed = append(failed, res.Err)
			}
		}
		if verr := r.verify(registries, updated, keychain); verr != nil {
			failed = append(failed, verr)
		}
		r.recordEvents(updated, set.Status.Images, next)
	}
	if !equality.Semantic.DeepEqual(set.Status.Images, updated.Status.Images) || set.Status.ImagesRefreshed != updated.Status.ImagesRefreshed {
		patch := client.MergeFromWithOptions(&set, client.MergeFromWithOptimisticLock{})
		if err := r.Client.Status().Patch(ctx, updated, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("patching status.images: %w", err)
		}
	}
	if len(failed) > 0 {
		// Backoff, and the set's status says why meanwhile.
		return ctrl.Result{}, fmt.Errorf("resolving the images of SidecarSet %s: %w", set.Name, errors.Join(failed...))
	}
	if !inject.PinsDigests(&set) {
		return ctrl.Result{}, nil
	}
	recheck := r.Recheck
	if recheck == 0 {
		recheck = 10 * time.Minute
	}
	return ctrl.Result{RequeueAfter: recheck}, nil
}

// keychain holds the credentials of the set's pull secrets; anonymous access for registries
// they do not name.
func (r *ImageResolver) keychain(ctx context.Context, set *appsv1alpha1.SidecarSet) (authn.Keychain, error) {
	var secrets []corev1.Secret
	for _, ref := range set.Spec.ImagePolicy.PullSecrets {
		var s corev1.Secret
		if err := r.Secrets.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: ref.Name}, &s); err != nil {
			return nil, fmt.Errorf("reading pull secret %s/%s (spec.imagePolicy.pullSecrets): %w", r.Namespace, ref.Name, err)
		}
		secrets = append(secrets, s)
	}
	if len(secrets) == 0 {
		return authn.NewMultiKeychain(), nil
	}
	kc, err := kauth.NewFromPullSecrets(ctx, secrets)
	if err != nil {
		return nil, fmt.Errorf("reading the credentials of spec.imagePolicy.pullSecrets: %w", err)
	}
	return kc, nil
}

// recordEvents writes ImageResolutionFailed for each image whose resolution newly fails (or
// fails otherwise than before), and ImageTagMoved for each tag newly seen moved.
func (r *ImageResolver) recordEvents(set *appsv1alpha1.SidecarSet, previous, next []appsv1alpha1.ResolvedImage) {
	was := map[string]appsv1alpha1.ResolvedImage{}
	for _, p := range previous {
		was[p.Image] = p
	}
	rec := eventcatalog.Recorder{To: r.Recorder}
	for _, n := range next {
		p := was[n.Image]
		if n.Error != "" && n.Error != p.Error {
			pinned := "it has no digest yet"
			if n.Digest != "" {
				pinned = "pods keep " + inject.PinnedImage(n.Image, n.Digest)
			}
			rec.Record(set, eventcatalog.ImageResolutionFailed, "Resolve", "Resolving %s failed (%s): %s; retried with backoff",
				n.Image, n.Error, pinned)
		}
		if n.VerificationError != "" && n.VerificationError != p.VerificationError {
			rec.Record(set, eventcatalog.ImageVerificationFailed, "Verify", "%s did not verify: %s; new pods keep the last revision whose images verified; retried with backoff",
				inject.PinnedImage(n.Image, n.Digest), n.VerificationError)
		}
		if n.Verified != nil && (p.Verified == nil || *p.Verified != *n.Verified) {
			rec.Record(set, eventcatalog.ImageVerified, "Verify", "%s verified: signed by %s", inject.PinnedImage(n.Image, n.Verified.Digest), n.Verified.Signer)
		}
		if n.Latest != "" && n.Latest != p.Latest {
			rec.Record(set, eventcatalog.ImageTagMoved, "Resolve", "%s now names %s; pods keep %s until the set's images are refreshed "+
				"(kubectl sidecarset rollout refresh %s)", n.Image, n.Latest, n.Digest, set.Name)
		}
	}
}

// SetupWithManager registers the resolver: spec changes and the refresh annotation wake it,
// besides its own Recheck. Sets are resolved four at a time (a registry that never answers
// holds one worker, not every set), and a failing one is retried after 1s, doubling to 5
// minutes, rather than from 5ms.
func (r *ImageResolver) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("sidecarset-images").
		WithOptions(controller.Options{MaxConcurrentReconciles: 4,
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, 5*time.Minute)}).
		For(&appsv1alpha1.SidecarSet{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{}))).
		Complete(r)
}

// verify verifies, for a set with imagePolicy.verify, each pinned digest not verified yet under
// its current verify policy, and records in set.Status.Images who signed it or why it did not
// verify. For other sets it clears what earlier verifications recorded. A digest is verified
// once: the result holds until the digest or the policy changes.
func (r *ImageResolver) verify(ctx context.Context, set *appsv1alpha1.SidecarSet, keychain authn.Keychain) error {
	spec := set.Spec.ImagePolicy.Verify
	if spec == nil {
		for i := range set.Status.Images {
			set.Status.Images[i].Verified, set.Status.Images[i].VerificationError = nil, ""
		}
		return nil
	}
	policy := inject.VerifyPolicy(spec)
	var trust *images.Trust
	var terr error
	var failed []error
	for i := range set.Status.Images {
		img := &set.Status.Images[i]
		if img.Digest == "" || (img.Verified != nil && img.Verified.Digest == img.Digest && img.Verified.Policy == policy) {
			continue
		}
		if trust == nil && terr == nil {
			trust, terr = r.trust(ctx, spec)
		}
		var signer string
		err := terr
		if err == nil {
			var bundles [][]byte
			var problems []string
			if bundles, problems, err = r.Resolver.Bundles(ctx, img.Image, img.Digest, keychain); err == nil {
				if signer, err = trust.Verify(img.Image, img.Digest, bundles); err != nil && len(problems) > 0 {
					err = fmt.Errorf("%w; unreadable: %s", err, strings.Join(problems, "; "))
				}
			}
		}
		if err != nil {
			img.VerificationError = images.Cut(err.Error(), images.MaxError)
			failed = append(failed, fmt.Errorf("verifying %s: %w", inject.PinnedImage(img.Image, img.Digest), err))
			continue
		}
		img.Verified = &appsv1alpha1.VerifiedSignature{Digest: img.Digest, Signer: images.Cut(signer, 2048), Policy: policy, At: metav1.Now()}
		img.VerificationError = ""
	}
	return errors.Join(failed...)
}

// trust reads the keys and the trusted root spec names from their ConfigMaps, in the operator's
// namespace, from the API server (the operator caches no ConfigMaps).
func (r *ImageResolver) trust(ctx context.Context, spec *appsv1alpha1.ImageVerification) (*images.Trust, error) {
	read := func(field string, ref appsv1alpha1.ConfigMapKeyRef) ([]byte, error) {
		var cm corev1.ConfigMap
		if err := r.Secrets.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: ref.Name}, &cm); err != nil {
			return nil, fmt.Errorf("reading ConfigMap %s/%s (%s): %w", r.Namespace, ref.Name, field, err)
		}
		if v, ok := cm.Data[ref.Key]; ok {
			return []byte(v), nil
		}
		if v, ok := cm.BinaryData[ref.Key]; ok {
			return v, nil
		}
		return nil, fmt.Errorf("ConfigMap %s/%s (%s) has no key %q", r.Namespace, ref.Name, field, ref.Key)
	}
	keys := make([][]byte, len(spec.Keys))
	for i, ref := range spec.Keys {
		var err error
		if keys[i], err = read(fmt.Sprintf("spec.imagePolicy.verify.keys[%d]", i), ref); err != nil {
			return nil, err
		}
	}
	var rootJSON []byte
	if spec.TrustedRoot != nil {
		var err error
		if rootJSON, err = read("spec.imagePolicy.verify.trustedRoot", *spec.TrustedRoot); err != nil {
			return nil, err
		}
	}
	return images.NewTrust(spec, keys, rootJSON)
}

// registryBudget bounds the registry work of one reconcile: resolving and verifying all of a
// set's images. What is not done by then fails, says so in status, and is retried with backoff.
const registryBudget = 2 * time.Minute
