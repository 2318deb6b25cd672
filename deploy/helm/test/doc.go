// Package charttest checks the Helm chart in deploy/helm/tollgate against
// the programs it deploys. It is a module of its own so Kubernetes' API
// types stay out of Tollgate's go.mod; it imports Tollgate's own packages
// (the executor's config loader, the test Redis) through a replace of the
// main module, so what it checks is what the binaries do.
//
// The tests render the chart with the pinned Helm (bin/helm, or
// $TOLLGATE_HELM), decode every document strictly into k8s.io/api types,
// and check what a reader of the chart cannot see at a glance: ports and
// flags agree, probes reach served ports, every Secret and ConfigMap a pod
// names is rendered or documented as external, the security context holds
// for every pod, the PDB can be satisfied, executors point at the Service.
// Then they run the rendered control plane and executor as processes here,
// against a real redis-server, with the mounted files laid out in a temp
// dir, and pass a smoke run through them.
package charttest
