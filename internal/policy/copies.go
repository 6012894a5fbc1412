package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// MaxTransfers is the most variables (envName or envNames items of transferEnv entries, over
// all of a set's containers) that its policy copies in CEL: each is a scan of the pod's
// containers at every admission, and the largest set the CRD allows must stay within the API
// server's size limit for one expression. A set with more stays on the webhook (Check says so).
const MaxTransfers = 64

// MaxSharedMounts is the most app volume mounts (over all of a pod's app containers) that a
// policy shares into its sidecars: finding the first mount of each path compares every mount
// with those before it, and the API server's cost limit for one expression is reached at a
// few hundred mounts. A pod with more goes to the webhook, which injects it as always.
const MaxSharedMounts = 128

// MaxSharedDevices is, likewise, the most app volume devices a policy shares into its
// sidecars; pods hold few, and a pod with more goes to the webhook.
const MaxSharedDevices = 32

// appCopies renders what a policy copies from the pod's app containers into its sidecars, in
// the cases where the engine copies it unchanged; any other case sends the pod to the webhook.
//
// transferEnv: a variable the app container defines (its last definition counts) with a
// literal value that holds no "$" (no reference for the engine to resolve, no escape to keep),
// or with a valueFrom other than a resourceFieldRef that names no container (the engine pins
// that to the app's). The app container is the one sourceContainerName names, or the one the
// pod's field that sourceContainerNameFrom selects names. A missing app container, pod field
// or variable (the engine warns) routes the pod. Validation has ruled out a transferred name
// the container declares or transfers twice, so each name appends exactly one variable.
//
// shareVolumePolicy: the app containers' mounts, in order, at paths the sidecar does not mount
// already (the first mount of a path wins). A mount the engine leaves out and records in
// notShared (at a path the sidecar uses for a device, Bidirectional in an unprivileged
// sidecar) or brings variables for (subPathExpr) routes the pod, as does a pod with more than
// MaxSharedMounts app mounts.
//
// shareVolumeDevicePolicy: the app containers' devices, in order, the first of each path, but
// for those the sidecar declares itself (same volume, same path). A device the engine leaves
// out and records in notShared (at a path the sidecar uses for another device or a mount, of a
// volume it mounts or has as a device) routes the pod, as does a pod with more than
// MaxSharedDevices app devices.
type appCopies struct {
	variables []admissionregistrationv1.Variable
	// uncopied are CEL conditions: the pod must go to the webhook.
	uncopied []string
	// appMounts, appDevices: the variables holding the app mounts, devices are declared.
	appMounts, appDevices bool
}

func (ac *appCopies) declare(prefix, expr string) string {
	name := fmt.Sprintf("%s%d", prefix, len(ac.variables))
	ac.variables = append(ac.variables, admissionregistrationv1.Variable{Name: name, Expression: expr})
	return "variables." + name
}

// transfer declares the variable holding the app's definition of the variable name that t
// copies when the policy can copy it (a list of one; empty otherwise), and returns the CEL
// expression of the env entry the sidecar gets.
func (ac *appCopies) transfer(t appsv1alpha1.TransferEnvVar, name string) string {
	v := ac.declare("transfer", fmt.Sprintf(
		"object.spec.containers.filter(c, c.name == %s && has(c.env)).map(c, c.env.filter(e, e.name == %s)).filter(l, l.size() > 0).map(l, l[l.size() - 1])"+
			`.filter(e, has(e.valueFrom) ? !has(e.valueFrom.resourceFieldRef) || (has(e.valueFrom.resourceFieldRef.containerName) && e.valueFrom.resourceFieldRef.containerName != "")`+
			` : !(has(e.value) && e.value.contains("$")))`,
		sourceName(t), quote(name)))
	ac.uncopied = append(ac.uncopied, v+".size() == 0")
	return "dyn(" + v + "[0])"
}

// transferNames are the variables a transferEnv entry copies, in order.
func transferNames(t appsv1alpha1.TransferEnvVar) []string {
	if t.EnvName != "" {
		return []string{t.EnvName}
	}
	return t.EnvNames
}

// sourceName is a CEL string: the name of the app container t copies from. A pod field it
// lacks gives "", which names no container (the engine warns, the pod is routed).
func sourceName(t appsv1alpha1.TransferEnvVar) string {
	if t.SourceContainerNameFrom == nil || t.SourceContainerNameFrom.FieldRef == nil {
		return quote(t.SourceContainerName)
	}
	fieldPath := t.SourceContainerNameFrom.FieldRef.FieldPath
	if fieldPath == "metadata.name" {
		return `(has(object.metadata.name) ? object.metadata.name : "")`
	}
	for _, m := range []string{"labels", "annotations"} {
		if key, ok := inject.PodFieldKey(fieldPath, m); ok {
			return fmt.Sprintf(`(has(object.metadata.%[1]s) && %[2]s in object.metadata.%[1]s ? object.metadata.%[1]s[%[2]s] : "")`, m, quote(key))
		}
	}
	return `""` // refused by validation; the engine reads nothing either
}

// share declares the variable holding the app mounts sidecar gets, and returns it. The first
// app mount of each path is found once per pod (firstMounts), for every sharing sidecar. A pod
// with more than MaxSharedMounts app mounts goes to the webhook: that condition comes first
// among the uncopied ones, so firstMounts is never computed for it (CEL's || stops at true).
func (ac *appCopies) share(sidecar *corev1.Container) string {
	if !ac.appMounts {
		ac.variables = append(ac.variables,
			admissionregistrationv1.Variable{Name: "appMounts",
				Expression: "object.spec.containers.map(c, has(c.volumeMounts) ? c.volumeMounts : []).flatten()"},
			admissionregistrationv1.Variable{Name: "firstMounts",
				Expression: "variables.appMounts.transformList(i, m, !variables.appMounts.exists(j, p, j < i && p.mountPath == m.mountPath), m)"})
		ac.uncopied = append([]string{fmt.Sprintf("variables.appMounts.size() > %d", MaxSharedMounts)}, ac.uncopied...)
		ac.appMounts = true
	}
	own := make([]string, len(sidecar.VolumeMounts))
	for i, m := range sidecar.VolumeMounts {
		own[i] = m.MountPath
	}
	v := ac.declare("shared", fmt.Sprintf("variables.firstMounts.filter(m, !(m.mountPath in %s))", quoteAll(own)))
	left := []string{"has(m.subPathExpr)"}
	if devices := devicePaths(sidecar); len(devices) > 0 {
		left = append(left, "m.mountPath in "+quoteAll(devices))
	}
	if !inject.Privileged(sidecar) {
		left = append(left, `(has(m.mountPropagation) && m.mountPropagation == "Bidirectional")`)
	}
	ac.uncopied = append(ac.uncopied, fmt.Sprintf("%s.exists(m, %s)", v, strings.Join(left, " || ")))
	return v
}

// shareDevices declares the variable holding the app devices sidecar gets, and returns it. The
// first app device of each path is found once per pod (firstDevices), as for mounts. mounts is
// the variable holding the app mounts the sidecar gets ("" when it shares none): a device is
// left out at their paths and of their volumes too.
func (ac *appCopies) shareDevices(sidecar *corev1.Container, mounts string) string {
	if !ac.appDevices {
		ac.variables = append(ac.variables,
			admissionregistrationv1.Variable{Name: "appDevices",
				Expression: "object.spec.containers.map(c, has(c.volumeDevices) ? c.volumeDevices : []).flatten()"},
			admissionregistrationv1.Variable{Name: "firstDevices",
				Expression: "variables.appDevices.transformList(i, d, !variables.appDevices.exists(j, p, j < i && p.devicePath == d.devicePath), d)"})
		ac.uncopied = append([]string{fmt.Sprintf("variables.appDevices.size() > %d", MaxSharedDevices)}, ac.uncopied...)
		ac.appDevices = true
	}
	first := "variables.firstDevices"
	own := map[string]string{} // the sidecar's device paths -> their volumes
	var ownVolumes []string
	for _, d := range sidecar.VolumeDevices {
		own[d.DevicePath] = d.Name
		ownVolumes = append(ownVolumes, d.Name)
	}
	if len(own) > 0 {
		// The sidecar's own device is not added twice.
		first = fmt.Sprintf("%s.filter(d, !(d.devicePath in %[2]s && %[2]s[d.devicePath] == d.name))", first, stringMap(own))
	}
	v := ac.declare("devices", first)
	var mountPaths, mountVolumes []string
	for _, m := range sidecar.VolumeMounts {
		mountPaths, mountVolumes = append(mountPaths, m.MountPath), append(mountVolumes, m.Name)
	}
	var left []string
	for _, in := range []struct{ field, values string }{
		{"d.devicePath", quoteAll(slices.Sorted(maps.Keys(own)))}, {"d.name", quoteAll(ownVolumes)},
		{"d.devicePath", quoteAll(mountPaths)}, {"d.name", quoteAll(mountVolumes)},
	} {
		if in.values != "[]" {
			left = append(left, in.field+" in "+in.values)
		}
	}
	if mounts != "" {
		left = append(left, mounts+".exists(m, m.mountPath == d.devicePath || m.name == d.name)")
	}
	// A volume shared at two paths: the engine shares the first only.
	left = append(left, v+".exists(e, e.name == d.name && e.devicePath != d.devicePath)")
	ac.uncopied = append(ac.uncopied, fmt.Sprintf("%s.exists(d, %s)", v, strings.Join(left, " || ")))
	return v
}

// stringMap is the CEL literal of a map of strings.
func stringMap(m map[string]string) string {
	entries := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		entries = append(entries, quote(k)+": "+quote(m[k]))
	}
	return "{" + strings.Join(entries, ", ") + "}"
}

// uncopiedVariable is the variable that is true when the policy cannot copy everything (the pod
// then goes to the webhook); none when the set copies nothing. It comes after the others.
func (ac *appCopies) uncopiedVariable() (admissionregistrationv1.Variable, bool) {
	if len(ac.uncopied) == 0 {
		return admissionregistrationv1.Variable{}, false
	}
	return admissionregistrationv1.Variable{Name: "uncopied", Expression: strings.Join(ac.uncopied, " || ")}, true
}

func devicePaths(c *corev1.Container) []string {
	out := make([]string, len(c.VolumeDevices))
	for i, d := range c.VolumeDevices {
		out[i] = d.DevicePath
	}
	slices.Sort(out)
	return out
}

// containerLiteral is the CEL value of the container a sidecar is injected as: its literal,
// with the transferred variables after its own env, the shared mounts after its own and the
// shared devices after its own.
func containerLiteral(sc *appsv1alpha1.SidecarContainer, ac *appCopies) (string, error) {
	share := sc.ShareVolumePolicy.Type == appsv1alpha1.ShareVolumePolicyEnabled
	shareDevices := inject.SharesDevices(sc)
	if !share && !shareDevices && len(sc.TransferEnv) == 0 {
		return literal(&sc.Container)
	}
	rest := sc.Container
	var keys []string
	if len(sc.TransferEnv) > 0 {
		rest.Env = nil
		var entries []string
		for _, t := range sc.TransferEnv {
			for _, name := range transferNames(t) {
				entries = append(entries, ac.transfer(t, name))
			}
		}
		own, err := listLiteral(sc.Env)
		if err != nil {
			return "", err
		}
		keys = append(keys, fmt.Sprintf(`"env": dyn(%s + [%s])`, own, strings.Join(entries, ", ")))
	}
	var mounts string
	if share {
		rest.VolumeMounts = nil
		own, err := listLiteral(sc.VolumeMounts)
		if err != nil {
			return "", err
		}
		mounts = ac.share(&sc.Container)
		keys = append(keys, fmt.Sprintf(`"volumeMounts": dyn(%s + %s)`, own, mounts))
	}
	if shareDevices {
		rest.VolumeDevices = nil
		own, err := listLiteral(sc.VolumeDevices)
		if err != nil {
			return "", err
		}
		keys = append(keys, fmt.Sprintf(`"volumeDevices": dyn(%s + %s)`, own, ac.shareDevices(&sc.Container, mounts)))
	}
	lit, err := literal(&rest)
	if err != nil {
		return "", err
	}
	// lit is a map literal and never empty (a container has a name): the keys join its entries.
	return "{" + strings.Join(keys, ", ") + ", " + strings.TrimPrefix(lit, "{"), nil
}

// listLiteral is the CEL literal of a list, [] when empty.
func listLiteral[T any](list []T) (string, error) {
	if len(list) == 0 {
		return "[]", nil
	}
	return literal(list)
}
