package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/cli"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/status"
	"github.com/sidecarset/sidecarset-operator/test/builders"
)

// TestDigestPinnedImages: a set with imagePolicy.pin Digest, its registry served in the test
// process behind credentials that a pull secret in the operator's namespace holds. New pods
// get repository:tag@digest, and their record the pinned content's hash; the tag moved changes
// no pod (status.images says where it moved, with an ImageTagMoved event) until the set's
// images are refreshed, which makes a new revision; with the registry stopped, pods are still
// admitted with the pinned images, and an edit to an image that cannot be resolved leaves new
// pods on the last revision while the set says why (ImagesPinned False, ImageResolutionFailed).
func TestDigestPinnedImages(t *testing.T) {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "puller" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	must(t, err)
	host := u.Host
	image := host + "/agent:1.0"
	creds := authn.FromConfig(authn.AuthConfig{Username: "puller", Password: "s3cret"})
	push := func() string {
		t.Helper()
		img, err := random.Image(256, 1)
		must(t, err)
		ref, err := name.ParseReference(image, name.Insecure)
		must(t, err)
		must(t, remote.Write(ref, img, remote.WithAuth(creds)))
		d, err := img.Digest()
		must(t, err)
		return d.String()
	}
	first := push()

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "it-registry"},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig(t, host, "puller", "s3cret")}}
	must(t, k8s.Create(ctx, secret))
	t.Cleanup(func() { deleteIgnoreNotFound(t, secret) })

	ns := newNamespace(t, nil)
	set := builders.SidecarSet("it-pinned", builders.Selecting("digest-pinned"),
		builders.WithContainers(corev1.Container{Name: "agent", Image: image}))
	set.Spec.ImagePolicy = &appsv1alpha1.ImagePolicy{Pin: appsv1alpha1.ImagePinDigest,
		PullSecrets: []corev1.LocalObjectReference{{Name: secret.Name}}}
	set = createSet(t, set)

	created := 0
	injected := func(wantImage string) *corev1.Pod {
		t.Helper()
		created++
		pod := appPod(ns, fmt.Sprintf("digest-pinned-%d", created), "digest-pinned", true)
		must(t, k8s.Create(ctx, pod))
		i := slicesIndex(pod.Spec.Containers, "agent")
		if i < 0 || pod.Spec.Containers[i].Image != wantImage {
			t.Fatalf("pod %s has containers %v, agent image %q; want %s", pod.Name, containerNames(pod.Spec.Containers),
				imageOf(pod, "agent"), wantImage)
		}
		return pod
	}
	pod := injected(inject.PinnedImage(image, first))
	hash, _ := inject.InjectedHash(pod.Annotations, set.Name)
	var cur *appsv1alpha1.SidecarSet
	eventually(t, "the set's status to say its images are pinned", func() (bool, string) {
		cur = getSet(t, set)
		c := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionImagesPinned)
		return c != nil && c.Reason == status.ImagesPinned && cur.Status.Hash == hash && cur.Status.UpdateRevision != "" &&
				contains(c.Message, inject.PinnedImage(image, first)),
			fmt.Sprintf("ImagesPinned %+v, hash %s (the pod records %s), updateRevision %q", c, cur.Status.Hash, hash, cur.Status.UpdateRevision)
	})
	firstRevision := cur.Status.UpdateRevision
	// explain names the digest the pod's revision pinned.
	if code, stdout, stderr := plugin(t, "", "explain", "pod", pod.Name, "-n", ns); code != cli.ExitOK ||
		!contains(stdout, "images pinned: agent "+inject.PinnedImage(image, first)) {
		t.Errorf("explain exited %d and said:\n%s%s\nwant the pinned image named", code, stdout, stderr)
	}

	// The tag moves: nothing changes but what status says.
	moved := push()
	eventually(t, "status.images to say the tag moved", func() (bool, string) {
		cur = getSet(t, set)
		c := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionImagesPinned)
		return len(cur.Status.Images) == 1 && cur.Status.Images[0].Latest == moved && c != nil && c.Reason == status.ImagesTagMoved,
			fmt.Sprintf("images %+v, condition %+v", cur.Status.Images, c)
	})
	waitForSetEvent(t, set, "ImageTagMoved", moved)
	injected(inject.PinnedImage(image, first))

	// Refreshed with the plugin: a new revision, with the digest the tag names now.
	code, stdout, stderr := plugin(t, "", "rollout", "refresh", set.Name)
	if code != cli.ExitOK {
		t.Fatalf("rollout refresh exited %d: %s%s", code, stdout, stderr)
	}
	token := getSet(t, set).Annotations[appsv1alpha1.RefreshImagesAnnotation]
	if token == "" || !contains(stdout, token) {
		t.Fatalf("rollout refresh printed %q; the set's %s is %q", stdout, appsv1alpha1.RefreshImagesAnnotation, token)
	}
	eventually(t, "the refresh to pin the moved tag", func() (bool, string) {
		cur = getSet(t, set)
		return cur.Status.ImagesRefreshed == token && cur.Status.Images[0].Digest == moved && cur.Status.UpdateRevision != firstRevision,
			fmt.Sprintf("imagesRefreshed %q, images %+v, updateRevision %s", cur.Status.ImagesRefreshed, cur.Status.Images, cur.Status.UpdateRevision)
	})
	waitForSet(t, set)
	injected(inject.PinnedImage(image, moved))

	// The registry stops: pods are admitted as before; an edit to a new tag waits, and new pods
	// keep the last revision.
	srv.Close()
	injected(inject.PinnedImage(image, moved))
	last := getSet(t, set).Status.UpdateRevision
	patchSet(t, set, `{"spec":{"containers":[{"name":"agent","image":"`+host+`/agent:2.0"}]}}`)
	eventually(t, "the set to wait for agent:2.0", func() (bool, string) {
		cur = getSet(t, set)
		pinned := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionImagesPinned)
		ready := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionReady)
		return cur.Status.ObservedGeneration == cur.Generation && pinned != nil && pinned.Status == metav1.ConditionFalse &&
				ready != nil && ready.Reason == status.ReadyResolvingImages && contains(pinned.Message, host+"/agent:2.0", last),
			fmt.Sprintf("ImagesPinned %+v, Ready %+v", pinned, ready)
	})
	if cur.Status.UpdateRevision != last {
		t.Errorf("status.updateRevision %s while waiting; want the last resolved %s", cur.Status.UpdateRevision, last)
	}
	waitForSetEvent(t, set, "ImageResolutionFailed", host+"/agent:2.0")
	eventually(t, "the webhook to see the edit", func() (bool, string) {
		c, ok := op.Sets.Load().Get(set.Name)
		return ok && c.Set.Generation == cur.Generation, "not yet"
	})
	injected(inject.PinnedImage(image, moved))
}

// dockerConfig is a .dockerconfigjson holding user's credentials for host.
func dockerConfig(t *testing.T, host, user, password string) []byte {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}}})
	must(t, err)
	return raw
}

func getSet(t *testing.T, set *appsv1alpha1.SidecarSet) *appsv1alpha1.SidecarSet {
	t.Helper()
	var got appsv1alpha1.SidecarSet
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &got))
	return &got
}

func patchSet(t *testing.T, set *appsv1alpha1.SidecarSet, patch string) {
	t.Helper()
	must(t, k8s.Patch(ctx, set.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch))))
}

func slicesIndex(cs []corev1.Container, name string) int {
	for i := range cs {
		if cs[i].Name == name {
			return i
		}
	}
	return -1
}

func imageOf(pod *corev1.Pod, container string) string {
	if i := slicesIndex(pod.Spec.Containers, container); i >= 0 {
		return pod.Spec.Containers[i].Image
	}
	return ""
}

// TestRefreshNeedsPinnedImages: rollout refresh of a set that does not pin digests changes
// nothing and exits 1 saying so; of a set that does not exist, 1 as well.
func TestRefreshNeedsPinnedImages(t *testing.T) {
	set := createSet(t, agentSet("it-tags", "tags"))
	code, _, stderr := plugin(t, "", "rollout", "refresh", set.Name)
	if code != cli.ExitRefused || !contains(stderr, "spec.imagePolicy.pin is not Digest") {
		t.Errorf("rollout refresh of a set pinning no digests exited %d: %s", code, stderr)
	}
	if _, ok := getSet(t, set).Annotations[appsv1alpha1.RefreshImagesAnnotation]; ok {
		t.Error("rollout refresh annotated a set that pins no digests")
	}
	if code, _, stderr = plugin(t, "", "rollout", "refresh", "it-missing"); code != cli.ExitRefused || !contains(stderr, "does not exist") {
		t.Errorf("rollout refresh of a missing set exited %d: %s", code, stderr)
	}
}
