//go:build tools

// Package helm pins Helm, which CI uses to lint and render the chart in
// deploy/helm/tollgate (make helm). It is a module of its own so Helm's
// Kubernetes dependencies stay out of Tollgate's go.mod.
package helm

import _ "helm.sh/helm/v3/cmd/helm"
