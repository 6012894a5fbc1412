package policy

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// MaxTransfers is the most transferEnv entries, over all of a set's containers, that its policy
// copies in CEL: each is a scan of the pod's containers at every admission. A set with more
// stays on the webhook (Check says so).
const MaxTransfers = 64

// transfers renders the transferEnv entries a policy copies itself: those whose app variable
// reaches the sidecar unchanged in the engine. That is a variable the app container defines
// (its last definition counts) with a literal value that holds no "$" (no reference for the
// engine to resolve, no escape to keep), or with a valueFrom other than a resourceFieldRef
// that names no container (the engine pins that to the app's). Any other case, the app
// container or its variable missing included (the engine warns), sends the pod to the
// webhook. Validation has ruled out a transferred name the container declares or transfers
// twice, so each entry appends exactly one variable.
type transfers struct {
	variables []admissionregistrationv1.Variable
}

// entry declares the variable holding the app's definition of t's variable when the policy can
// copy it (a list of one; empty otherwise), and returns the CEL expression of the env entry the
// sidecar gets.
func (tr *transfers) entry(t appsv1alpha1.TransferEnvVar) string {
	name := fmt.Sprintf("transfer%d", len(tr.variables))
	tr.variables = append(tr.variables, admissionregistrationv1.Variable{Name: name, Expression: fmt.Sprintf(
		"object.spec.containers.filter(c, c.name == %s && has(c.env)).map(c, c.env.filter(e, e.name == %s)).filter(l, l.size() > 0).map(l, l[l.size() - 1])"+
			`.filter(e, has(e.valueFrom) ? !has(e.valueFrom.resourceFieldRef) || (has(e.valueFrom.resourceFieldRef.containerName) && e.valueFrom.resourceFieldRef.containerName != "")`+
			` : !(has(e.value) && e.value.contains("$")))`,
		quote(t.SourceContainerName), quote(t.EnvName))})
	return "dyn(variables." + name + "[0])"
}

// uncopied is the variable that is true when the policy cannot copy every entry (the pod then
// goes to the webhook); none when the set transfers nothing. It is declared after the entries'.
func (tr *transfers) uncopied() (admissionregistrationv1.Variable, bool) {
	if len(tr.variables) == 0 {
		return admissionregistrationv1.Variable{}, false
	}
	terms := make([]string, len(tr.variables))
	for i, v := range tr.variables {
		terms[i] = "variables." + v.Name + ".size() == 0"
	}
	return admissionregistrationv1.Variable{Name: "uncopied", Expression: strings.Join(terms, " || ")}, true
}

// containerLiteral is the CEL value of the container a sidecar is injected as: its literal,
// with the transferred variables after its own env.
func containerLiteral(sc *appsv1alpha1.SidecarContainer, tr *transfers) (string, error) {
	if len(sc.TransferEnv) == 0 {
		return literal(&sc.Container)
	}
	rest := sc.Container
	rest.Env = nil
	lit, err := literal(&rest)
	if err != nil {
		return "", err
	}
	declared := "[]"
	if len(sc.Env) > 0 {
		if declared, err = literal(sc.Env); err != nil {
			return "", err
		}
	}
	entries := make([]string, len(sc.TransferEnv))
	for k, t := range sc.TransferEnv {
		entries[k] = tr.entry(t)
	}
	env := fmt.Sprintf(`"env": dyn(%s + [%s])`, declared, strings.Join(entries, ", "))
	// lit is a map literal and never empty (a container has a name): env joins its entries.
	return "{" + env + ", " + strings.TrimPrefix(lit, "{"), nil
}
