# The tokentriage CLI, whose `accountant` command the Kubernetes Deployment
# in istio/accountant.yaml runs. Build it from the repository root:
#
#   docker build -f envoy/tokentriage.Dockerfile \
#     -t registry.example.com/tokentriage/tokentriage:v0.1.0 .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Pure Go (the SQLite driver included), so the binary is static.
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/tokentriage ./cmd/tokentriage

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tokentriage /usr/local/bin/tokentriage
USER 65532:65532
ENTRYPOINT ["tokentriage"]
