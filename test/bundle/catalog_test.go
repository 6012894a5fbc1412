package bundle_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// meta is the part of a file-based catalog object (olm.package, olm.channel, olm.bundle) the
// tests read.
type meta struct {
	Schema         string     `json:"schema"`
	Name           string     `json:"name"`
	Package        string     `json:"package"`
	DefaultChannel string     `json:"defaultChannel"`
	Image          string     `json:"image"`
	Entries        []entry    `json:"entries"`
	Properties     []property `json:"properties"`
}

// entry is one bundle of an olm.channel.
type entry struct {
	Name string `json:"name"`
}

// property is one property of an olm.bundle.
type property struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// loadCatalog reads every object of the package's catalog directory, grouped by schema.
func loadCatalog(t *testing.T) map[string][]meta {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(catalogDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("No catalog in %s: run `make catalog`", catalogDir)
	}
	bySchema := map[string][]meta{}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var m meta
			if err := decoder.Decode(&m); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			bySchema[m.Schema] = append(bySchema[m.Schema], m)
		}
	}
	return bySchema
}

// TestCatalog checks the package, its channels and that the one bundle is this bundle/, inline.
func TestCatalog(t *testing.T) {
	csv := loadBundle(t).CSV
	catalog := loadCatalog(t)
	if len(catalog["olm.package"]) != 1 || len(catalog["olm.bundle"]) != 1 || len(catalog["olm.channel"]) == 0 {
		t.Fatalf("Want one package, one bundle and channels; got %d, %d and %d",
			len(catalog["olm.package"]), len(catalog["olm.bundle"]), len(catalog["olm.channel"]))
	}
	pkg, bundle := catalog["olm.package"][0], catalog["olm.bundle"][0]
	if pkg.Name != packageName || pkg.DefaultChannel != "alpha" {
		t.Errorf("Package %q with default channel %q, want %q and alpha", pkg.Name, pkg.DefaultChannel, packageName)
	}
	if bundle.Name != csv.Name || bundle.Package != packageName {
		t.Errorf("Catalog bundle %q of package %q, want %q of %q: run `make catalog`", bundle.Name, bundle.Package, csv.Name, packageName)
	}
	var channels []string
	for _, channel := range catalog["olm.channel"] {
		channels = append(channels, channel.Name)
		if channel.Package != packageName || !slices.Contains(channel.Entries, entry{Name: csv.Name}) {
			t.Errorf("Channel %q of package %q does not list %s", channel.Name, channel.Package, csv.Name)
		}
	}
	if !slices.Contains(channels, pkg.DefaultChannel) {
		t.Errorf("Default channel %q is none of %v", pkg.DefaultChannel, channels)
	}
	// image "" makes OLM install from the inline objects, without pulling a bundle image.
	if bundle.Image != "" {
		t.Errorf("Catalog bundle image = %q, want \"\" (rendered from the bundle directory)", bundle.Image)
	}
}

// TestCatalogEmbedsBundle compares the catalog's olm.bundle.object properties with the files in
// bundle/manifests, so a catalog rendered from an older bundle fails.
func TestCatalogEmbedsBundle(t *testing.T) {
	loadBundle(t)
	catalog := loadCatalog(t)
	if len(catalog["olm.bundle"]) != 1 {
		t.Fatalf("Want one bundle in the catalog, got %d", len(catalog["olm.bundle"]))
	}
	var embedded []any
	for _, property := range catalog["olm.bundle"][0].Properties {
		if property.Type != "olm.bundle.object" {
			continue
		}
		var value struct {
			Data []byte `json:"data"` // base64 in the catalog; encoding/json decodes it
		}
		if err := json.Unmarshal(property.Value, &value); err != nil {
			t.Fatalf("olm.bundle.object: %v", err)
		}
		embedded = append(embedded, decodeObject(t, "olm.bundle.object", value.Data))
	}
	files, err := filepath.Glob(filepath.Join(bundleDir, "manifests", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(embedded) {
		t.Errorf("Catalog embeds %d objects, bundle/manifests has %d: run `make catalog`", len(embedded), len(files))
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		want := decodeObject(t, file, raw)
		if !slices.ContainsFunc(embedded, func(got any) bool { return reflect.DeepEqual(got, want) }) {
			t.Errorf("The catalog does not embed %s as it is now: run `make catalog`", filepath.Base(file))
		}
	}
}

// decodeObject turns YAML or JSON into generic values that compare equal when the objects do.
func decodeObject(t *testing.T, name string, raw []byte) any {
	t.Helper()
	data, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var obj any
	if err := json.Unmarshal(data, &obj); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return obj
}
