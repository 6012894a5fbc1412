package pins_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/cli"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/inject/injecttest"
)

// pinnedHashes are the hashes of the sample SidecarSets (config/samples/<set>), of the
// golden cases' (golden/<case>/<set>) and of the sets in this package's testdata
// (pins/<set>: sets written before a field was added, kept as they were), each as the API
// server stores it (defaulted with the CRD's schema). A pod records the hash of the set that injected it, and a pod whose hash is not
// the set's counts as outdated.
//
// CHANGING ONE OF THESE MEANS EVERY RUNNING POD OF SUCH A SET TURNS OUTDATED WHEN THE OPERATOR
// IS UPGRADED (a rolling update then restarts their sidecars, or they stay PodsUpdated=False
// until recreated). A new field of the API types that is not omitted when empty, a changed
// JSON name or a changed default in the CRD all do that. Update this table only when that is
// intended and said in the CHANGELOG.
var pinnedHashes = map[string]string{
	"config/samples/log-agent":                              "6bf3f9c87b18c9db",
	"config/samples/proxy":                                  "97abe087e7cb8bac",
	"golden/app-container-identical/log-agent":              "a0b45119eec8de3e",
	"golden/before-app-container/auth-proxy":                "f66879ed0a9bf9af",
	"golden/conflict-app-container/log-agent":               "971faf5aee60be34",
	"golden/conflict-app-init-container/mesh-proxy":         "9d33453c5f8d2807",
	"golden/conflict-container-port/otel-agent":             "1c7b4962ddffef35",
	"golden/conflict-host-port/node-exporter":               "969c49e282f1a802",
	"golden/conflict-port-name-before-app/proxy":            "d3d2ae6fb8c2079e",
	"golden/conflict-port-name-native-sidecar/proxy":        "f67cfaa494ebafce",
	"golden/conflict-two-sets-container/log-agent":          "971faf5aee60be34",
	"golden/conflict-two-sets-container/log-shipper":        "239e9abc1773c324",
	"golden/conflict-two-sets-volume/log-agent":             "30e18c805baaf4c8",
	"golden/conflict-two-sets-volume/metrics-exporter":      "0dc7ecbab9128822",
	"golden/conflict-volume-definition/cert-reloader":       "b741a50db3344b5e",
	"golden/host-network-declared-host-port/node-agent":     "7136c17479413c52",
	"golden/host-network-native-sidecar-port/mesh-proxy":    "b6d4ccabf3f0480b",
	"golden/host-network-ports/node-agent":                  "b83b2c89e991d819",
	"golden/host-port-free/node-exporter":                   "a5064e09c399d942",
	"golden/log-agent-share-volumes-transfer-env/log-agent": "fd68fba92bb1d169",
	"golden/malformed-annotation/log-agent":                 "971faf5aee60be34",
	"golden/namespace-selector/log-agent":                   "971faf5aee60be34",
	"golden/namespace-selector/mesh-proxy":                  "ab949557cee7c7f7",
	"golden/native-sidecar-proxy/mesh-proxy":                "9d33453c5f8d2807",
	"golden/not-opted-in/log-agent":                         "971faf5aee60be34",
	"golden/paused-with-record/log-agent":                   "971faf5aee60be34",
	"golden/paused-with-record/metrics-exporter":            "073d7e26d3fd9e7e",
	"golden/paused-without-record/log-agent":                "971faf5aee60be34",
	"golden/overrides-env/log-agent":                        "7321ce3e4e5b7779",
	"golden/overrides-not-quantity/mesh-proxy":              "d45791416efb9e2f",
	"golden/overrides-refused-limits/mesh-proxy":            "d45791416efb9e2f",
	"golden/overrides-refused-rule/mesh-proxy":              "d45791416efb9e2f",
	"golden/overrides-resources/mesh-proxy":                 "d45791416efb9e2f",
	"golden/patch-metadata-conflict/log-agent":              "e5d350c9a88fd6c1",
	"golden/patch-metadata-conflict/metrics-exporter":       "c426ca71293a33ca",
	"golden/patch-metadata-merge-not-object/log-agent":      "54b43dc066333013",
	"golden/patch-metadata-merge/log-agent":                 "9f231fb33e05f328",
	"golden/patch-metadata-not-allowed/log-agent":           "f03c93aed28dd66e",
	"golden/patch-metadata-overwrite/log-agent":             "ee3c783e6c530d53",
	"golden/patch-metadata-retain/log-agent":                "40c9d3a599f70a7f",
	"golden/pod-defines-identical-volume/cert-reloader":     "9aa4b831e60e893d",
	"golden/pod-resources-exceeded/mesh-proxy":              "dded2c1ab027ee0e",
	"golden/pod-resources-fit/mesh-proxy":                   "dded2c1ab027ee0e",
	"golden/pod-resources-pad-burstable/mesh-proxy":         "dded2c1ab027ee0e",
	"golden/pod-resources-pad-guaranteed/mesh":              "e4ad5504621b4b94",
	"golden/pod-resources-pad-init-container/mesh":          "d1edb255e9b8c055",
	"golden/pod-resources-pad-limits-only/log-agent":        "65c5f11a6ec647ec",
	"golden/port-name-after-app-warned/statsd":              "7db1c241a80e410b",
	"golden/pull-secrets-one-present/log-agent":             "6ccc27705e216ec5",
	"golden/reinject-old-hash/log-agent":                    "971faf5aee60be34",
	"golden/resources-policy-max-regex/mesh-proxy":          "dea122f4ba626750",
	"golden/resources-policy-negative/mesh-proxy":           "0cf7bbc77d0e343a",
	"golden/resources-policy-no-target/mesh-proxy":          "23801db92f12b69e",
	"golden/resources-policy-pod-resources/mesh-proxy":      "b5101eb3ae6c9af7",
	"golden/resources-policy/log-agent":                     "787ce6205a2fc352",
	"golden/resources-policy/mesh-proxy":                    "a17f10f68acdef8e",
	"golden/routed-by-policy/log-agent":                     "35284898bf37b966",
	"golden/share-volume-devices-left-out/block-backup":     "a41f6e334969fda5",
	"golden/share-volume-devices/block-backup":              "b3c613e22f5d63fc",
	"golden/share-volumes-copied/log-shipper":               "cb2be8136f6bb69a",
	"golden/share-volumes-left-out/log-agent":               "5b2038c6debb14a1",
	"golden/share-volumes-subpathexpr-defaulted/log-agent":  "ccfaa7331d276722",
	"golden/stale-record-stripped/legacy-agent":             "14f22a5858ca3f28",
	"golden/stale-record-stripped/log-agent":                "971faf5aee60be34",
	"golden/transfer-env-copied/telemetry":                  "37fbdfc3b13ed84b",
	"golden/transfer-env-defaulted/log-agent":               "19575a068bd6e5a7",
	"golden/transfer-env-from-pod-field-missing/telemetry":  "32b42826bccda280",
	"golden/transfer-env-from-pod-field/telemetry":          "5e04fdbb9a1df966",
	"golden/transfer-env-missing/log-agent":                 "4f8f8aac43f1c2bf",
	"golden/transfer-env-references/proxy":                  "95af5c6f8378408e",
	"golden/two-sets-order-shared-volume/log-agent":         "2bfb35af10642e79",
	"golden/two-sets-order-shared-volume/metrics-exporter":  "e090de7766812288",
	"pins/block-agent":                                      "fb5a2fb58f970a59",
}

// TestHashesArePinned recomputes every pinned hash: a hash that moved means an upgrade would
// mark running pods outdated. Every sample and golden set must be pinned, and every pin must
// still name one.
func TestHashesArePinned(t *testing.T) {
	got := map[string]string{}
	samples, err := filepath.Glob("../../../config/samples/*.yaml")
	if err != nil || len(samples) == 0 {
		t.Fatalf("listing config/samples: %v (%d files)", err, len(samples))
	}
	for _, path := range samples {
		if filepath.Base(path) == "kustomization.yaml" {
			continue
		}
		for _, set := range readStoredSets(t, path) {
			got["config/samples/"+set.Name] = inject.Hash(&set.Spec)
		}
	}
	pinned, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(pinned) == 0 {
		t.Fatalf("listing testdata: %v (%d files)", err, len(pinned))
	}
	for _, path := range pinned {
		for _, set := range readStoredSets(t, path) {
			got["pins/"+set.Name] = inject.Hash(&set.Spec)
		}
	}
	for _, c := range injecttest.LoadCases(t, "../testdata") {
		var docs [][]byte
		for _, set := range c.Sets {
			docs = append(docs, mustYAML(t, set))
		}
		for _, set := range readStored(t, c.Name, bytes.Join(docs, []byte("\n---\n"))) {
			got["golden/"+c.Name+"/"+set.Name] = inject.Hash(&set.Spec)
		}
	}
	for _, name := range sortedKeys(got) {
		want, ok := pinnedHashes[name]
		switch {
		case !ok:
			t.Errorf("%s has hash %q, which no pin holds: add %q: %q, to pinnedHashes", name, got[name], name, got[name])
		case want != got[name]:
			t.Errorf("%s: hash %q, pinned %q: every running pod of such a set would turn outdated on upgrade", name, got[name], want)
		}
	}
	for _, name := range sortedKeys(pinnedHashes) {
		if _, ok := got[name]; !ok {
			t.Errorf("pinnedHashes holds %s, which is no sample or golden set any more: remove it", name)
		}
	}
}

// TestRolloutOrderLeavesHashes: the order of a rolling update (priorityStrategy,
// scatterStrategy) is no part of what a set injects: each sample set given one, in its YAML,
// keeps its pinned hash, so adding or changing the order never marks a pod outdated.
func TestRolloutOrderLeavesHashes(t *testing.T) {
	samples, err := filepath.Glob("../../../config/samples/*.yaml")
	if err != nil || len(samples) == 0 {
		t.Fatalf("listing config/samples: %v (%d files)", err, len(samples))
	}
	orders := map[string]map[string]any{
		"weights and scatter": {"type": "RollingUpdate",
			"priorityStrategy": map[string]any{"weightPriority": []any{map[string]any{"weight": 50, "matchSelector": map[string]any{"matchLabels": map[string]any{"tier": "canary"}}}}},
			"scatterStrategy":  []any{map[string]any{"key": "topology.kubernetes.io/zone", "value": "*"}}},
		"ordered keys": {"type": "RollingUpdate",
			"priorityStrategy": map[string]any{"orderPriority": []any{map[string]any{"orderedKey": "apps.kubernetes.io/pod-index"}}}},
	}
	checked := 0
	for _, path := range samples {
		if filepath.Base(path) == "kustomization.yaml" {
			continue
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for name, strategy := range orders {
			var doc map[string]any
			if err := yaml.Unmarshal(raw, &doc); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			doc["spec"].(map[string]any)["updateStrategy"] = strategy
			for _, set := range readStored(t, path, mustYAML(t, doc)) {
				key := "config/samples/" + set.Name
				got, ordered := inject.Hash(&set.Spec), set.Spec.UpdateStrategy.PriorityStrategy != nil
				if got != pinnedHashes[key] || !ordered {
					t.Errorf("%s with %s: hash %q, pinned %q (priority strategy read: %v)", key, name, got, pinnedHashes[key], ordered)
				}
				checked++
			}
		}
	}
	if checked == 0 {
		t.Fatal("no sample set to check")
	}
}

// readStoredSets reads the SidecarSets of a file as the API server stores them.
func readStoredSets(t *testing.T, path string) []*appsv1alpha1.SidecarSet {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return readStored(t, path, raw)
}

func readStored(t *testing.T, source string, raw []byte) []*appsv1alpha1.SidecarSet {
	t.Helper()
	sets, err := cli.ReadSidecarSets(bytes.NewReader(raw), source)
	if err != nil {
		t.Fatalf("reading the SidecarSets of %s: %v", source, err)
	}
	return sets
}

func mustYAML(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := yaml.Marshal(v)
	if err != nil {
		t.Fatalf("marshaling %T: %v", v, err)
	}
	return raw
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	return keys
}

// TestPatchPodMetadataInHash: the annotations a set patches are part of what it injects, so
// changing them makes its pods outdated (and a rollout re-applies them); a set without them has
// the hash it had before the field existed (the pins above of every other set).
func TestPatchPodMetadataInHash(t *testing.T) {
	checked := 0
	for _, c := range injecttest.LoadCases(t, "../testdata") {
		for _, set := range c.Sets {
			if len(set.Spec.PatchPodMetadata) == 0 {
				continue
			}
			checked++
			without := set.DeepCopy()
			without.Spec.PatchPodMetadata = nil
			if inject.Hash(&set.Spec) == inject.Hash(&without.Spec) {
				t.Errorf("%s/%s: the same hash with and without spec.patchPodMetadata", c.Name, set.Name)
			}
			changed := set.DeepCopy()
			for k := range changed.Spec.PatchPodMetadata[0].Annotations {
				changed.Spec.PatchPodMetadata[0].Annotations[k] += "-changed"
			}
			if inject.Hash(&set.Spec) == inject.Hash(&changed.Spec) {
				t.Errorf("%s/%s: the same hash after a patched value changed", c.Name, set.Name)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no golden case has a set with spec.patchPodMetadata")
	}
}

// TestOverridesInHash: which fields pods may override, and to what, is part of what a set
// injects, so changing spec.overrides makes its pods outdated; a set without overrides has the
// hash it had before the field existed (the pins above of every other set).
func TestOverridesInHash(t *testing.T) {
	checked := 0
	for _, c := range injecttest.LoadCases(t, "../testdata") {
		for _, set := range c.Sets {
			if len(set.Spec.Overrides) == 0 {
				continue
			}
			checked++
			without := set.DeepCopy()
			without.Spec.Overrides = nil
			if inject.Hash(&set.Spec) == inject.Hash(&without.Spec) {
				t.Errorf("%s/%s: the same hash with and without spec.overrides", c.Name, set.Name)
			}
			changed := set.DeepCopy()
			changed.Spec.Overrides[0].Rule += " && true"
			if inject.Hash(&set.Spec) == inject.Hash(&changed.Spec) {
				t.Errorf("%s/%s: the same hash after an override's rule changed", c.Name, set.Name)
			}
			stored, err := inject.WithContent(without, inject.Content(&set.Spec))
			if err != nil {
				t.Fatalf("%s/%s: %v", c.Name, set.Name, err)
			}
			if inject.Hash(&stored.Spec) != inject.Hash(&set.Spec) {
				t.Errorf("%s/%s: a stored revision does not carry spec.overrides", c.Name, set.Name)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no golden case has a set with spec.overrides")
	}
}
