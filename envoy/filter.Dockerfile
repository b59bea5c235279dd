# The tokentriage filter as an OCI image for Istio's WasmPlugin: the
# "compat" variant of the Wasm image specification, one layer holding
# plugin.wasm and nothing else. Build it from the build/ folder `make wasm`
# fills (envoy/README.md, "Publishing the filter for Istio"):
#
#   docker buildx build -f envoy/filter.Dockerfile \
#     --platform linux/amd64 --provenance=false \
#     -t registry.example.com/tokentriage/tokentriage-filter:v0.1.0 --push build/
FROM scratch
COPY filter.wasm ./plugin.wasm
