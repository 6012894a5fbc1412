package webhook

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/validation"
)

// +kubebuilder:webhook:path=/validate-apps-sidecarset-io-v1alpha1-sidecarset,mutating=false,failurePolicy=fail,sideEffects=None,groups=apps.sidecarset.io,resources=sidecarsets,verbs=create;update,versions=v1alpha1,name=validate.sidecarset.io,admissionReviewVersions=v1,timeoutSeconds=5

// SidecarSetValidator rejects SidecarSets that are invalid on their own or that clash with
// another SidecarSet able to select the same Pods.
type SidecarSetValidator struct {
	// Reader lists the other SidecarSets; the manager's cached client.
	Reader client.Reader
}

var _ admission.Validator[*appsv1alpha1.SidecarSet] = &SidecarSetValidator{}

// ValidateCreate implements admission.Validator.
func (v *SidecarSetValidator) ValidateCreate(ctx context.Context, set *appsv1alpha1.SidecarSet) (admission.Warnings, error) {
	return nil, v.validate(ctx, set)
}

// ValidateUpdate implements admission.Validator. An update that leaves the spec as it was
// (labels, annotations, finalizers) is allowed: it changes nothing the operator acts on, and
// refusing it would leave a set stored while the webhook was down, or one in a conflict that
// got past validation, impossible to label or annotate until someone else fixes theirs.
func (v *SidecarSetValidator) ValidateUpdate(ctx context.Context, old, set *appsv1alpha1.SidecarSet) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(old.Spec, set.Spec) {
		return nil, nil
	}
	return nil, v.validate(ctx, set)
}

// ValidateDelete implements admission.Validator; deleting is always allowed.
func (v *SidecarSetValidator) ValidateDelete(context.Context, *appsv1alpha1.SidecarSet) (admission.Warnings, error) {
	return nil, nil
}

func (v *SidecarSetValidator) validate(ctx context.Context, set *appsv1alpha1.SidecarSet) error {
	var others appsv1alpha1.SidecarSetList
	if err := v.Reader.List(ctx, &others); err != nil {
		return fmt.Errorf("listing SidecarSets to check for conflicts: %w", err)
	}
	if errs := validation.ValidateSidecarSet(set, others.Items); len(errs) > 0 {
		return apierrors.NewInvalid(appsv1alpha1.GroupVersion.WithKind("SidecarSet").GroupKind(), set.Name, errs)
	}
	return nil
}
