package inject

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/fieldpath"
	"k8s.io/kubernetes/third_party/forked/golang/expansion"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// render returns the container to inject: the declared one with the pod's overrides
// (spec.overrides), plus the transferred env vars and, with shareVolumePolicy or
// shareVolumeDevicePolicy enabled, the app containers' volume mounts or devices that stay valid
// in the sidecar. copies says which of its entries come from the
// app containers (nil when none does), notShared which app mounts and devices were left out
// and why (the record keeps them). The declared container is shared, not copied, when nothing
// is added to it.
func (b *builder) render(set *CompiledSet, sc *appsv1alpha1.SidecarContainer) (out *corev1.Container, copies *Copies, notShared []leftOut) {
	declared := Overridden(set, &sc.Container, b.pod.Annotations) // the pod's spec.overrides values
	share := sc.ShareVolumePolicy.Type == appsv1alpha1.ShareVolumePolicyEnabled
	shareDevices := SharesDevices(sc)
	if !share && !shareDevices && len(sc.TransferEnv) == 0 {
		return declared, nil, nil
	}
	r := *declared // shallow copy; only the slices below are replaced
	r.Env = append([]corev1.EnvVar(nil), declared.Env...)
	copies = &Copies{}
	for _, t := range sc.TransferEnv {
		b.transferEnv(set, &r, copies, t)
	}
	if share {
		var left []leftOut
		r.VolumeMounts, left = b.sharedMounts(&r, copies)
		notShared = append(notShared, left...)
	}
	// After the mounts: a device is left out at a path or of a volume a shared mount uses.
	if shareDevices {
		var left []leftOut
		r.VolumeDevices, left = b.sharedDevices(&r, copies)
		notShared = append(notShared, left...)
	}
	if len(r.Env) == 0 {
		r.Env = declared.Env // keep nil as nil
	}
	if copies.empty() {
		copies = nil
	}
	return &r, copies, notShared
}

// leftOut is an app mount or device that shareVolumePolicy or shareVolumeDevicePolicy (field)
// left out of a sidecar, and why (what the record's notShared holds).
type leftOut struct{ field, what string }

// SharesDevices reports whether a sidecar has shareVolumeDevicePolicy enabled.
func SharesDevices(sc *appsv1alpha1.SidecarContainer) bool {
	return sc.ShareVolumeDevicePolicy != nil && sc.ShareVolumeDevicePolicy.Type == appsv1alpha1.ShareVolumePolicyEnabled
}

// appendEnv appends vars, the app's env entries at from as a sidecar needs them, to the
// sidecar's env and notes where each came from.
func (b *builder) appendEnv(sidecar *corev1.Container, copies *Copies, app *corev1.Container, vars []corev1.EnvVar, from []int) {
	pos := b.podIndex(app)
	for k := range vars {
		copies.noteEnv(len(sidecar.Env), Source{Container: pos, Index: from[k]})
		sidecar.Env = append(sidecar.Env, vars[k])
	}
}

// transferEnv appends to the sidecar the env vars of one transferEnv entry (envName, or each
// of envNames) from the app container it names (sourceContainerName, or the pod's field that
// sourceContainerNameFrom selects). When the pod does not name an app container it has,
// nothing is transferred and one warning says why, as for a missing variable.
func (b *builder) transferEnv(set *CompiledSet, sidecar *corev1.Container, copies *Copies, t appsv1alpha1.TransferEnvVar) {
	names := t.EnvNames
	if t.EnvName != "" {
		names = []string{t.EnvName}
	}
	source, from, named := transferSource(b.pod, t)
	if !named {
		b.warnings = append(b.warnings, fmt.Sprintf("SidecarSet %q container %q: transferEnv of %s from the container named by the pod's %s: the pod has %s; the sidecar runs without %s",
			set.Name(), sidecar.Name, quoteNames(names), from, missingField(from), theVariables(names)))
		return
	}
	app := b.appContainerNamed(source)
	if app == nil {
		b.warnings = append(b.warnings, fmt.Sprintf("SidecarSet %q container %q: transferEnv of %s from container %q%s: the pod has no app container of that name; the sidecar runs without %s",
			set.Name(), sidecar.Name, quoteNames(names), source, namedBy(from), theVariables(names)))
		return
	}
	for _, name := range names {
		b.transferVar(sidecar, copies, app, name, func(format string, args ...any) {
			b.warnings = append(b.warnings, fmt.Sprintf("SidecarSet %q container %q: transferEnv of %q from container %q%s: ",
				set.Name(), sidecar.Name, name, source, namedBy(from))+fmt.Sprintf(format, args...))
		})
	}
}

// transferSource is the name of the app container a transferEnv entry copies from, and the
// pod field it was read from ("" for sourceContainerName). named is false when the pod lacks
// that field (a label or annotation it does not carry, a name it does not have yet).
func transferSource(pod *corev1.Pod, t appsv1alpha1.TransferEnvVar) (name, from string, named bool) {
	if t.SourceContainerNameFrom == nil || t.SourceContainerNameFrom.FieldRef == nil {
		return t.SourceContainerName, "", true
	}
	from = t.SourceContainerNameFrom.FieldRef.FieldPath
	name, named = PodField(pod, from)
	return name, from, named
}

// PodField reads the field of the pod that a sourceContainerNameFrom fieldPath selects:
// metadata.name, metadata.labels['<key>'] or metadata.annotations['<key>']. It reports false
// when the pod does not have it: the label or annotation is absent, or the name is empty (a
// pod created with generateName is named after admission). Any other path (refused by
// validation) selects nothing.
func PodField(pod *corev1.Pod, fieldPath string) (string, bool) {
	if fieldPath == "metadata.name" {
		return pod.Name, pod.Name != ""
	}
	if key, ok := PodFieldKey(fieldPath, "labels"); ok {
		v, ok := pod.Labels[key]
		return v, ok
	}
	if key, ok := PodFieldKey(fieldPath, "annotations"); ok {
		v, ok := pod.Annotations[key]
		return v, ok
	}
	return "", false
}

// PodFieldKey returns the key that a sourceContainerNameFrom fieldPath selects among the pod's
// labels (of is "labels") or annotations ("annotations"); false when it selects no such key.
func PodFieldKey(fieldPath, of string) (string, bool) {
	path, key, ok := fieldpath.SplitMaybeSubscriptedPath(fieldPath)
	return key, ok && path == "metadata."+of
}

func missingField(fieldPath string) string {
	switch {
	case fieldPath == "metadata.name":
		return "no name yet (a pod created with generateName is named after admission)"
	case strings.HasPrefix(fieldPath, "metadata.labels["):
		return "no such label"
	case strings.HasPrefix(fieldPath, "metadata.annotations["):
		return "no such annotation"
	}
	return "no such field"
}

// namedBy says, after a container's name, which pod field named it (nothing when the set did).
func namedBy(fieldPath string) string {
	if fieldPath == "" {
		return ""
	}
	return " (named by the pod's " + fieldPath + ")"
}

func quoteNames(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	return strings.Join(quoted, ", ")
}

func theVariables(names []string) string {
	if len(names) == 1 {
		return "the variable"
	}
	return "these variables"
}

// transferVar appends to the sidecar the app's env var name as the app container sees it. Its
// value is rewritten so that the sidecar's kubelet expands it to what the app's kubelet does:
// $(VAR) references to the app's earlier literal vars are resolved, references to vars it takes
// from a source (valueFrom) bring those definitions along, and a resourceFieldRef without a
// containerName is pinned to the app container. When that cannot be done faithfully (the
// sidecar defines a referenced var differently) nothing is transferred and warn says why.
func (b *builder) transferVar(sidecar *corev1.Container, copies *Copies, app *corev1.Container, name string, warn func(string, ...any)) {
	vars, from, free, ok := appEnvView(app, name)
	if !ok {
		warn("the app container has no such env var; the sidecar runs without it")
		return
	}
	for _, ref := range free {
		if envIndex(sidecar.Env, ref) >= 0 {
			warn("the app's value refers to $(%s), which the app does not define before it and the sidecar does; nothing was transferred", ref)
			return
		}
	}
	var add []corev1.EnvVar
	var addFrom []int
	for k, v := range vars {
		i := envIndex(sidecar.Env, v.Name)
		switch {
		case i < 0:
			add, addFrom = append(add, v), append(addFrom, from[k])
		case !sameEnvVar(&sidecar.Env[i], &v):
			warn("the sidecar defines %q, which the app's value depends on, differently; nothing was transferred", v.Name)
			return
		}
	}
	b.appendEnv(sidecar, copies, app, add, addFrom)
}

// appEnvView returns the definitions that give a sidecar the value the app container sees for
// name: the var itself last, preceded by the app's valueFrom vars it references. free are the
// names it refers to that the app does not define before it (service links, or left as
// written): they resolve alike in the sidecar unless the sidecar defines them. from[k] is the
// index in app.Env that vars[k] is a definition of.
func appEnvView(app *corev1.Container, name string) (vars []corev1.EnvVar, from []int, free []string, ok bool) {
	i := lastEnvIndex(app.Env, len(app.Env), name)
	if i < 0 {
		return nil, nil, nil, false
	}
	r := envResolver{app: app, deps: sets.New[int](), free: sets.New[string]()}
	v := r.definition(i)
	if v.ValueFrom == nil {
		v.Value = r.form(i)
	}
	for _, j := range sets.List(r.deps) {
		vars, from = append(vars, r.definition(j)), append(from, j)
	}
	return append(vars, v), append(from, i), sets.List(r.free), true
}

// envResolver rewrites an app container's env var values for another container of the Pod.
type envResolver struct {
	app  *corev1.Container
	deps sets.Set[int]    // indices of valueFrom vars the value refers to
	free sets.Set[string] // names it refers to that the app does not define before
}

// refSentinel marks where a reference was in an expanded value. Env values cannot hold NUL
// bytes usefully, and a value that does is transferred as written.
func refSentinel(k int) string { return "\x00" + strconv.Itoa(k) + "\x00" }

// form is app.Env[i].Value written so that the kubelet's expansion in another container gives
// what it gives in the app: the app's expansion is run (the kubelet's own code), its literal
// output escaped, and each reference replaced by what it resolved to.
func (r *envResolver) form(i int) string {
	value := r.app.Env[i].Value
	if strings.ContainsRune(value, 0) {
		return value
	}
	var refs []string
	expanded := expansion.Expand(value, func(name string) string {
		refs = append(refs, name)
		return refSentinel(len(refs) - 1)
	})
	out := strings.ReplaceAll(expanded, "$", "$$")
	for k, name := range refs {
		out = strings.Replace(out, refSentinel(k), r.resolve(name, i), 1)
	}
	return out
}

// resolve is what a reference to name in app.Env[i] becomes: the last earlier definition's
// value when it is literal; the reference itself when it names a valueFrom var (which then
// travels along) or nothing the app defines (service links resolve alike in every container).
func (r *envResolver) resolve(name string, i int) string {
	j := lastEnvIndex(r.app.Env, i, name)
	switch {
	case j < 0:
		r.free.Insert(name)
		return "$(" + name + ")"
	case r.app.Env[j].ValueFrom != nil:
		r.deps.Insert(j)
		return "$(" + name + ")"
	default:
		return r.form(j)
	}
}

// definition is a copy of app.Env[i] valid in another container: a resourceFieldRef without
// a containerName would resolve against that container, so it names the app's.
func (r *envResolver) definition(i int) corev1.EnvVar {
	v := *r.app.Env[i].DeepCopy()
	if v.ValueFrom != nil && v.ValueFrom.ResourceFieldRef != nil && v.ValueFrom.ResourceFieldRef.ContainerName == "" {
		v.ValueFrom.ResourceFieldRef.ContainerName = r.app.Name
	}
	return v
}

func lastEnvIndex(env []corev1.EnvVar, before int, name string) int {
	for j := before - 1; j >= 0; j-- {
		if env[j].Name == name {
			return j
		}
	}
	return -1
}

func envIndex(env []corev1.EnvVar, name string) int { return lastEnvIndex(env, len(env), name) }

// sharedMounts appends the app containers' mounts to the sidecar's own, leaving out those that
// would not be valid in the sidecar: a path it already uses (its own mount wins, silently), a
// path it uses as a device, Bidirectional propagation in an unprivileged sidecar, and a
// subPathExpr whose variables the sidecar defines differently. Variables a subPathExpr needs
// are brought from the app container.
func (b *builder) sharedMounts(sidecar *corev1.Container, copies *Copies) ([]corev1.VolumeMount, []leftOut) {
	out := append([]corev1.VolumeMount(nil), sidecar.VolumeMounts...)
	taken := sets.New[string]()
	for _, m := range out {
		taken.Insert(m.MountPath)
	}
	devices := sets.New[string]()
	for _, d := range sidecar.VolumeDevices {
		devices.Insert(d.DevicePath)
	}
	var notShared []leftOut
	skip := func(app *corev1.Container, m *corev1.VolumeMount, why string) {
		notShared = append(notShared, leftOut{"shareVolumePolicy",
			fmt.Sprintf("%s: %s from container %q (volume %q): %s", sidecar.Name, m.MountPath, app.Name, m.Name, why)})
	}
	for _, app := range b.appContainers {
		pos := b.podIndex(app)
		for i := range app.VolumeMounts {
			m := &app.VolumeMounts[i]
			switch {
			case taken.Has(m.MountPath):
				continue
			case devices.Has(m.MountPath):
				skip(app, m, "the sidecar uses that path for a volume device")
			case m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional && !Privileged(sidecar):
				skip(app, m, "Bidirectional mount propagation needs a privileged container")
			case m.SubPathExpr != "" && !b.bringSubPathEnv(sidecar, copies, app, m.SubPathExpr):
				skip(app, m, "its subPathExpr uses a variable the sidecar defines differently")
			default:
				taken.Insert(m.MountPath)
				copies.noteVolumeMount(len(out), Source{Container: pos, Index: i})
				out = append(out, *m.DeepCopy())
			}
		}
	}
	return out, notShared
}

// sharedDevices appends the app containers' volume devices to the sidecar's own, at the same
// paths. The first device of a path among the app containers is the one shared, as for
// mounts; one the sidecar has already (same volume, same path) is not added twice. Left out,
// since Kubernetes refuses such a container: a device at a path the sidecar uses for another
// device or for a mount, and a device of a volume the sidecar uses already (a container uses a
// volume as one device, or as mounts, never both).
func (b *builder) sharedDevices(sidecar *corev1.Container, copies *Copies) ([]corev1.VolumeDevice, []leftOut) {
	out := append([]corev1.VolumeDevice(nil), sidecar.VolumeDevices...)
	own := map[string]string{} // the sidecar's device paths -> their volumes
	for _, d := range out {
		own[d.DevicePath] = d.Name
	}
	mountPaths, mountVolumes := sets.New[string](), sets.New[string]()
	for _, m := range sidecar.VolumeMounts {
		mountPaths.Insert(m.MountPath)
		mountVolumes.Insert(m.Name)
	}
	deviceVolumes := sets.New(slices.Collect(maps.Values(own))...)
	seen := sets.New[string]() // app device paths already decided
	var notShared []leftOut
	skip := func(app *corev1.Container, d *corev1.VolumeDevice, why string) {
		notShared = append(notShared, leftOut{"shareVolumeDevicePolicy",
			fmt.Sprintf("%s: device %s from container %q (volume %q): %s", sidecar.Name, d.DevicePath, app.Name, d.Name, why)})
	}
	for _, app := range b.appContainers {
		pos := b.podIndex(app)
		for i := range app.VolumeDevices {
			d := &app.VolumeDevices[i]
			if seen.Has(d.DevicePath) {
				continue
			}
			seen.Insert(d.DevicePath)
			volume, owned := own[d.DevicePath]
			switch {
			case owned && volume == d.Name:
				continue // the sidecar declares this very device
			case owned:
				skip(app, d, fmt.Sprintf("the sidecar uses that path for its own device of volume %q", volume))
			case mountPaths.Has(d.DevicePath):
				skip(app, d, "the sidecar mounts a volume at that path")
			case mountVolumes.Has(d.Name):
				skip(app, d, "the sidecar mounts that volume, and a container cannot use a volume both as a mount and as a device")
			case deviceVolumes.Has(d.Name):
				skip(app, d, "the sidecar has that volume as a device at another path already, and a container can use a volume as one device only")
			default:
				deviceVolumes.Insert(d.Name)
				copies.noteVolumeDevice(len(out), Source{Container: pos, Index: i})
				out = append(out, *d.DeepCopy())
			}
		}
	}
	return out, notShared
}

// bringSubPathEnv adds to the sidecar the app's variables that expr refers to, so the
// subPathExpr resolves to the same directory. It reports false when the sidecar defines one
// of them differently (the mount would land elsewhere).
func (b *builder) bringSubPathEnv(sidecar *corev1.Container, copies *Copies, app *corev1.Container, expr string) bool {
	var add []corev1.EnvVar
	var addFrom []int
	ok := true
	expansion.Expand(expr, func(name string) string {
		vars, from, _, found := appEnvView(app, name)
		for k, v := range vars {
			if !found {
				break
			}
			i := envIndex(sidecar.Env, v.Name)
			if i < 0 && envIndex(add, v.Name) < 0 {
				add, addFrom = append(add, v), append(addFrom, from[k])
			} else if i >= 0 && !sameEnvVar(&sidecar.Env[i], &v) {
				ok = false
			}
		}
		return ""
	})
	if ok {
		b.appendEnv(sidecar, copies, app, add, addFrom)
	}
	return ok
}

// Privileged reports whether c runs privileged.
func Privileged(c *corev1.Container) bool {
	return c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
}

// podIndex is the index of one of the Pod's own containers in its spec.containers (app
// containers are always taken from there; -1 cannot happen).
func (b *builder) podIndex(app *corev1.Container) int {
	for i := range b.pod.Spec.Containers {
		if &b.pod.Spec.Containers[i] == app {
			return i
		}
	}
	return -1
}

func (b *builder) appContainerNamed(name string) *corev1.Container {
	for _, app := range b.appContainers {
		if app.Name == name {
			return app
		}
	}
	return nil
}
