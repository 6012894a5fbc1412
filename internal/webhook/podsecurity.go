package webhook

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// PodSecurity tells when injection makes a pod break its namespace's enforced Pod Security
// Standard. PodSecurity admission stays the judge (it refuses such a pod, naming the
// container); the injector only says which SidecarSet is the cause, as an admission warning
// and an event on the set, since PodSecurity's message cannot. It evaluates with the Pod
// Security Admission library's own checks, on the namespace's enforce labels; exemptions live
// in the API server's configuration, which the operator cannot see, so it never refuses a pod
// itself.
type PodSecurity struct {
	evaluator policy.Evaluator
}

// NewPodSecurity builds the evaluator with the library's default checks.
func NewPodSecurity() (*PodSecurity, error) {
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return nil, fmt.Errorf("building the Pod Security evaluator: %w", err)
	}
	return &PodSecurity{evaluator: e}, nil
}

// Enforced returns the level the namespace enforces, and false when it enforces none (or
// privileged, which allows everything).
func (p *PodSecurity) Enforced(namespaceLabels map[string]string) (psaapi.LevelVersion, bool) {
	if p == nil {
		return psaapi.LevelVersion{}, false
	}
	defaults := psaapi.Policy{Enforce: psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()}}
	pol, errs := psaapi.PolicyToEvaluate(namespaceLabels, defaults)
	if len(errs) > 0 || pol.Enforce.Level == psaapi.LevelPrivileged {
		return psaapi.LevelVersion{}, false
	}
	return pol.Enforce, true
}

// Violation returns what the injected pod violates at level lv that the pod as written did
// not, or "" when injection broke nothing.
func (p *PodSecurity) Violation(lv psaapi.LevelVersion, before, after *corev1.Pod) string {
	res := policy.AggregateCheckResults(p.evaluator.EvaluatePod(lv, &after.ObjectMeta, &after.Spec))
	if res.Allowed {
		return ""
	}
	was := policy.AggregateCheckResults(p.evaluator.EvaluatePod(lv, &before.ObjectMeta, &before.Spec))
	if !was.Allowed {
		return "" // refused as written: not the injection's doing
	}
	return fmt.Sprintf("violates PodSecurity %q: %s", strings.ToLower(string(lv.Level))+":"+lv.Version.String(), res.ForbiddenDetail())
}
