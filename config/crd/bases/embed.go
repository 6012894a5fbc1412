// Package bases holds the generated CustomResourceDefinitions, embedded for the kubectl
// plugin: it defaults SidecarSets read from files with the CRD's own schema, as the API
// server does.
package bases

import _ "embed"

// SidecarSets is the SidecarSet CRD as controller-gen writes it.
//
//go:embed apps.sidecarset.io_sidecarsets.yaml
var SidecarSets []byte
