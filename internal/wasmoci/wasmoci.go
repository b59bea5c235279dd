// Package wasmoci packages a Wasm filter as an OCI image for an Istio
// WasmPlugin (url: oci://…): the Wasm artifact variant of the Wasm image
// specification that Istio's agent pulls, a config blob of media type
// application/vnd.module.wasm.config.v1+json and one layer of media type
// application/vnd.module.wasm.content.layer.v1+wasm that is the module
// itself, written as an OCI image layout (a directory crane, oras or skopeo
// push as is).
//
// Every byte is a function of the module alone (no timestamps, fixed key
// order), so the manifest digest, which a WasmPlugin pins (its sha256, or
// url …@sha256:), follows from the module's own SHA-256 and size:
// ManifestDigest computes it without the module, so a pin can be checked
// against the build it names.
package wasmoci

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Media types of the Wasm artifact image variant.
const (
	ConfigMediaType   = "application/vnd.module.wasm.config.v1+json"
	LayerMediaType    = "application/vnd.module.wasm.content.layer.v1+wasm"
	ManifestMediaType = "application/vnd.oci.image.manifest.v1+json"
	IndexMediaType    = "application/vnd.oci.image.index.v1+json"
)

// RootID is the filter's root context id, recorded in the image config.
const RootID = "tokentriage"

// Descriptor is an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        Descriptor   `json:"config"`
	Layers        []Descriptor `json:"layers"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

// config is the runtime config of an Envoy Wasm filter image.
func config() []byte {
	return []byte(`{"type":"envoy_proxy","abiVersions":["proxy_abi_version_0_2_1"],"config":{"root_ids":["` + RootID + `"]}}`)
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Manifest is the image manifest for a module of the given SHA-256 (hex)
// and size.
func Manifest(wasmSHA256 string, wasmSize int64) ([]byte, error) {
	if len(wasmSHA256) != 64 || strings.Trim(wasmSHA256, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("wasmoci: %q is not a SHA-256 in lowercase hex", wasmSHA256)
	}
	if wasmSize <= 0 {
		return nil, fmt.Errorf("wasmoci: module size %d", wasmSize)
	}
	cfg := config()
	m := manifest{
		SchemaVersion: 2,
		MediaType:     ManifestMediaType,
		Config:        Descriptor{MediaType: ConfigMediaType, Digest: digestOf(cfg), Size: int64(len(cfg))},
		Layers: []Descriptor{{
			MediaType:   LayerMediaType,
			Digest:      "sha256:" + wasmSHA256,
			Size:        wasmSize,
			Annotations: map[string]string{"org.opencontainers.image.title": "plugin.wasm"},
		}},
	}
	return json.Marshal(m)
}

// ManifestDigest is the digest (sha256:…) of the image of a module of the
// given SHA-256 and size: what a WasmPlugin pins.
func ManifestDigest(wasmSHA256 string, wasmSize int64) (string, error) {
	m, err := Manifest(wasmSHA256, wasmSize)
	if err != nil {
		return "", err
	}
	return digestOf(m), nil
}

// Image is a built image: its manifest digest and the module's digest.
type Image struct {
	Digest     string // the manifest's: what a WasmPlugin pins
	WasmSHA256 string // hex
	WasmSize   int64
}

// WriteLayout writes the image of module wasm as an OCI image layout in
// dir (created if absent, its old contents replaced), the manifest tagged
// tag in index.json.
func WriteLayout(dir string, wasm []byte, tag string) (Image, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return Image{}, errors.New("wasmoci: the module is not WebAssembly (no \\0asm header)")
	}
	sum := sha256.Sum256(wasm)
	img := Image{WasmSHA256: hex.EncodeToString(sum[:]), WasmSize: int64(len(wasm))}
	m, err := Manifest(img.WasmSHA256, img.WasmSize)
	if err != nil {
		return Image{}, err
	}
	img.Digest = digestOf(m)
	ix := index{SchemaVersion: 2, MediaType: IndexMediaType, Manifests: []Descriptor{{
		MediaType: ManifestMediaType, Digest: img.Digest, Size: int64(len(m)),
		Annotations: map[string]string{"org.opencontainers.image.ref.name": tag},
	}}}
	ixb, err := json.Marshal(ix)
	if err != nil {
		return Image{}, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return Image{}, err
	}
	blobs := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return Image{}, err
	}
	files := map[string][]byte{
		filepath.Join(dir, "oci-layout"): []byte(`{"imageLayoutVersion":"1.0.0"}`),
		filepath.Join(dir, "index.json"): ixb,
	}
	for _, b := range [][]byte{config(), wasm, m} {
		files[filepath.Join(blobs, strings.TrimPrefix(digestOf(b), "sha256:"))] = b
	}
	for name, b := range files {
		if err := os.WriteFile(name, b, 0o644); err != nil {
			return Image{}, err
		}
	}
	return img, nil
}
