// Package revision keeps the history of what each SidecarSet injected: one ControllerRevision
// per distinct content (containers, init containers, volumes, pull secrets), in the operator's
// namespace, named <set>-<hash> and labelled with the set's name and the hash that Pods record.
// It is pure: Reconcile says what to create, renumber and delete; the controller does it.
package revision

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// DefaultHistoryLimit is how many revisions besides the current one are kept when the
// SidecarSet does not say.
const DefaultHistoryLimit = 10

// Name is the name of the revision of set's content with that hash.
func Name(set, hash string) string { return set + "-" + hash }

// Plan is what Reconcile decided.
type Plan struct {
	// Current is the name of the revision holding the set's current content.
	Current string
	// Create is a revision to create; nil when it exists.
	Create *appsv1.ControllerRevision
	// Renumber is an existing revision to update: one that becomes current again (a rollback
	// to content stored earlier) gets the highest number, and the current one of a set verifying
	// signatures records those verified since it was stored. Nil when not needed.
	Renumber *appsv1.ControllerRevision
	// Delete are the revisions beyond the history limit, oldest first.
	Delete []string
}

// Reconcile decides what to do with the stored revisions of c's set so that its current
// content is stored, as the newest revision, with at most the history limit of older ones.
// existing are the set's revisions (other sets' are ignored); they are not modified. inUse are
// the hashes that Pods the set selects record: their revisions are never pruned, so a rollout
// can always tell a sidecar edited since injection. Nor is the revision the set pins
// (spec.injectionStrategy.revision): new Pods get it. The history limit counts the others.
func Reconcile(c *inject.CompiledSet, namespace string, existing []appsv1.ControllerRevision, inUse func(hash string) bool) Plan {
	set := c.Set
	var mine []*appsv1.ControllerRevision
	for i := range existing {
		if existing[i].Labels[appsv1alpha1.RevisionSetLabel] == set.Name {
			mine = append(mine, &existing[i])
		}
	}
	slices.SortFunc(mine, func(a, b *appsv1.ControllerRevision) int {
		if a.Revision != b.Revision {
			return int(a.Revision - b.Revision)
		}
		return compare(a.Name, b.Name)
	})
	p := Plan{Current: Name(set.Name, c.Hash)}
	next := int64(1)
	if len(mine) > 0 {
		next = mine[len(mine)-1].Revision + 1
	}
	i := slices.IndexFunc(mine, func(r *appsv1.ControllerRevision) bool { return r.Name == p.Current })
	var current *appsv1.ControllerRevision // as it is once p is applied
	switch {
	case i < 0:
		p.Create = newRevision(set, c.Hash, namespace, next)
		current = p.Create
	case i < len(mine)-1:
		p.Renumber = mine[i].DeepCopy()
		p.Renumber.Revision = next
		current = p.Renumber
	default:
		current = mine[i]
	}
	if signed := signatures(set); signed != "" && p.Create == nil && current.Annotations[appsv1alpha1.SignaturesAnnotation] != signed {
		// Its digests verified since it was stored (verify set on a set pinning them, or other
		// signers): the revision records it, so the webhook may fall back to it.
		updated := current.DeepCopy()
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		updated.Annotations[appsv1alpha1.SignaturesAnnotation] = signed
		p.Renumber, current = updated, updated
	}
	if i >= 0 {
		mine = slices.Delete(mine, i, i+1)
	}
	p.Delete = prune(set, mine, current, inUse)
	return p
}

// prune names the revisions of older (the set's, oldest first, the current one left out)
// beyond the set's history limit, oldest first. It keeps, and does not count, the revision the
// set pins, as the pin resolves once current is stored (a pin by custom version follows the
// newest revision with that version, which may then be current), and the revisions inUse
// says Pods record. inUse is asked only when the history is over the limit.
func prune(set *appsv1alpha1.SidecarSet, older []*appsv1.ControllerRevision, current *appsv1.ControllerRevision, inUse func(hash string) bool) []string {
	limit := DefaultHistoryLimit
	if set.Spec.RevisionHistoryLimit != nil {
		limit = int(*set.Spec.RevisionHistoryLimit)
	}
	// Pruned, the pinned revision would be "not stored", and every new Pod would get the
	// current spec: the pin undone by the operator itself.
	if pinned := Pinned(set, append(slices.Clone(older), current)); pinned != nil {
		older = slices.DeleteFunc(older, func(r *appsv1.ControllerRevision) bool { return r == pinned })
	}
	if len(older) > limit && inUse != nil {
		older = slices.DeleteFunc(older, func(r *appsv1.ControllerRevision) bool { return inUse(r.Labels[appsv1alpha1.RevisionHashLabel]) })
	}
	var out []string
	for len(older) > limit {
		out = append(out, older[0].Name)
		older = older[1:]
	}
	return out
}

// newRevision stores set's current content. It is owned by the SidecarSet, so it goes when
// the set does.
func newRevision(set *appsv1alpha1.SidecarSet, hash, namespace string, number int64) *appsv1.ControllerRevision {
	labels := map[string]string{appsv1alpha1.RevisionSetLabel: set.Name, appsv1alpha1.RevisionHashLabel: hash}
	if v, ok := set.Labels[appsv1alpha1.CustomVersionLabel]; ok {
		labels[appsv1alpha1.CustomVersionLabel] = v
	}
	var annotations map[string]string
	if signed := signatures(set); signed != "" {
		annotations = map[string]string{appsv1alpha1.SignaturesAnnotation: signed}
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: Name(set.Name, hash), Namespace: namespace, Labels: labels,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: appsv1alpha1.GroupVersion.String(), Kind: "SidecarSet", Name: set.Name, UID: set.UID,
			}},
		},
		Data:     runtime.RawExtension{Raw: inject.Content(&set.Spec)},
		Revision: number,
	}
}

// Content returns the SidecarSet as it was at revision r: set with r's stored content.
func Content(set *appsv1alpha1.SidecarSet, r *appsv1.ControllerRevision) (*appsv1alpha1.SidecarSet, error) {
	out, err := inject.WithContent(set, r.Data.Raw)
	if err != nil {
		return nil, fmt.Errorf("revision %s: %w", r.Name, err)
	}
	return out, nil
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Pinned finds the revision that set.spec.injectionStrategy.revision names among revs (any
// sets' revisions; only set's own count): by name, or the newest with the custom version.
// Nil when the set pins none or the revision is not there.
func Pinned(set *appsv1alpha1.SidecarSet, revs []*appsv1.ControllerRevision) *appsv1.ControllerRevision {
	ref := set.Spec.InjectionStrategy.Revision
	if ref == nil {
		return nil
	}
	var found *appsv1.ControllerRevision
	for _, r := range revs {
		if r.Labels[appsv1alpha1.RevisionSetLabel] != set.Name {
			continue
		}
		matches := r.Name == ref.Name
		if ref.CustomVersion != "" {
			matches = r.Labels[appsv1alpha1.CustomVersionLabel] == ref.CustomVersion
		}
		if matches && (found == nil || r.Revision > found.Revision) {
			found = r
		}
	}
	return found
}

// Describe names what a RevisionRef points at, for messages.
func Describe(ref *appsv1alpha1.RevisionRef) string {
	if ref.CustomVersion != "" {
		return fmt.Sprintf("the revision with %s=%s", appsv1alpha1.CustomVersionLabel, ref.CustomVersion)
	}
	return "revision " + ref.Name
}

// Resolve returns set as it injects: for a set that pins a revision
// (spec.injectionStrategy.revision), set with that revision's content. While the pinned
// revision is not among revs, or cannot be read, it returns set itself and says which revision
// is missing and why, e.g. "revision agent-0123, which is not stored"; missing is empty
// otherwise. The webhook's snapshot and the policy compiler both resolve sets with it.
func Resolve(set *appsv1alpha1.SidecarSet, revs []*appsv1.ControllerRevision) (content *appsv1alpha1.SidecarSet, missing string) {
	ref := set.Spec.InjectionStrategy.Revision
	if ref == nil {
		return set, ""
	}
	r := Pinned(set, revs)
	if r == nil {
		return set, Describe(ref) + ", which is not stored"
	}
	content, err := Content(set, r)
	if err != nil {
		return set, fmt.Sprintf("%s, which cannot be read (%v)", Describe(ref), err)
	}
	if why := Unverified(set, content, r); why != "" {
		return set, Describe(ref) + ", whose " + why
	}
	return content, ""
}

// Compile compiles content, set as Resolve returned it. A set pinning digests
// (imagePolicy.pin Digest) whose images are not all resolved yet goes on injecting what it
// injected last: the revision its status.updateRevision names, which stored finds when it is
// stored. waiting then says which images it waits for; c is nil, and err is waiting, when that
// revision is not stored either (a new set: it injects nothing until its images resolve).
func Compile(set, content *appsv1alpha1.SidecarSet, stored func(name string) *appsv1.ControllerRevision) (
	c *inject.CompiledSet, waiting *inject.ImagesNotResolvedError, err error) {
	c, err = inject.Compile(content)
	if !errors.As(err, &waiting) || content != set {
		return c, nil, err
	}
	last := stored(set.Status.UpdateRevision)
	if set.Status.UpdateRevision == "" || last == nil || last.Labels[appsv1alpha1.RevisionSetLabel] != set.Name {
		return nil, waiting, err
	}
	old, cerr := Content(set, last)
	if cerr != nil {
		return nil, waiting, err
	}
	if Unverified(set, old, last) != "" {
		return nil, waiting, err // stored before verify was set, or under other signers: inject nothing
	}
	if c, cerr = inject.Compile(old); cerr != nil {
		return nil, waiting, err
	}
	return c, waiting, nil
}

// signatures is what a new revision of a set verifying its images' signatures
// (imagePolicy.verify) records of them: the verify policy's hash on the first line, then the
// verified signature of each image, one line each. Empty for other sets.
func signatures(set *appsv1alpha1.SidecarSet) string {
	if set.Spec.ImagePolicy == nil || set.Spec.ImagePolicy.Verify == nil {
		return ""
	}
	lines := []string{policyLine + inject.VerifyPolicy(set.Spec.ImagePolicy.Verify)}
	for _, img := range set.Status.Images {
		if img.Verified != nil && img.Verified.Digest == img.Digest {
			lines = append(lines, inject.PinnedImage(img.Image, img.Digest)+signedBy+img.Verified.Signer)
		}
	}
	return strings.Join(lines, "\n")
}

const (
	policyLine = "policy "
	signedBy   = " signed by "
)

// Unverified says why r, a revision of set with content, may not be injected while set verifies
// its images' signatures (imagePolicy.verify): r must record a verified signature, under the
// set's current verify policy, for every image content names. Empty when it may be injected, or
// when set verifies nothing. A revision stored before verify was set, or under other signers,
// is never injected unverified.
func Unverified(set, content *appsv1alpha1.SidecarSet, r *appsv1.ControllerRevision) string {
	if set.Spec.ImagePolicy == nil || set.Spec.ImagePolicy.Verify == nil {
		return ""
	}
	lines := strings.Split(r.Annotations[appsv1alpha1.SignaturesAnnotation], "\n")
	if lines[0] != policyLine+inject.VerifyPolicy(set.Spec.ImagePolicy.Verify) {
		return fmt.Sprintf("revision %s records no signature verified under the current spec.imagePolicy.verify", r.Name)
	}
	signed := map[string]bool{}
	for _, l := range lines[1:] {
		if image, _, ok := strings.Cut(l, signedBy); ok {
			signed[image] = true
		}
	}
	for _, image := range inject.ImagesToVerify(&content.Spec) {
		if !signed[image] {
			return fmt.Sprintf("revision %s records no verified signature for %s", r.Name, image)
		}
	}
	return ""
}
