// Package envoy holds the Envoy and Istio deployment of tokentriage: the
// Envoy bootstraps in this folder (envoy.yaml, envoy-embedded-plan.yaml), the
// Istio manifests under istio/, and the tests that check each of them
// against the proxy's own schema. Envoy configs are decoded strictly into
// go-control-plane's Bootstrap (an unknown or misspelt field fails, every
// typed_config is resolved) and run through the generated validators; the
// Istio manifests are decoded strictly into istio.io/api and k8s.io/api
// types. The filter's plugin configuration found in each is checked with
// pluginconf.Decode, the same decode and compile the filter runs.
//
// The package has no code of its own: README.md explains how to run each
// deployment.
package envoy
