package wasmoci

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The layout is a valid OCI image layout: every descriptor names a blob of
// that digest and size, the index tags the manifest, and the manifest's
// digest is the one ManifestDigest computes from the module alone.
func TestWriteLayout(t *testing.T) {
	wasm := append([]byte("\x00asm\x01\x00\x00\x00"), []byte(strings.Repeat("x", 1000))...)
	dir := filepath.Join(t.TempDir(), "oci")
	img, err := WriteLayout(dir, wasm, "v1")
	if err != nil {
		t.Fatal(err)
	}
	blob := func(d Descriptor) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(d.Digest, "sha256:")))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if "sha256:"+hex.EncodeToString(sum[:]) != d.Digest || int64(len(b)) != d.Size {
			t.Fatalf("blob %s: content does not match its descriptor", d.Digest)
		}
		return b
	}
	var ix index
	b, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	if err := json.Unmarshal(b, &ix); err != nil || len(ix.Manifests) != 1 {
		t.Fatalf("index.json: %s, %v", b, err)
	}
	if ix.Manifests[0].Digest != img.Digest || ix.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v1" {
		t.Errorf("index: %+v, want the manifest %s tagged v1", ix.Manifests[0], img.Digest)
	}
	var m manifest
	if err := json.Unmarshal(blob(ix.Manifests[0]), &m); err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != ConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != LayerMediaType {
		t.Fatalf("manifest: %+v", m)
	}
	if got := blob(m.Layers[0]); string(got) != string(wasm) {
		t.Error("the layer is not the module")
	}
	var cfg struct {
		Type   string `json:"type"`
		Config struct {
			RootIDs []string `json:"root_ids"`
		} `json:"config"`
	}
	if err := json.Unmarshal(blob(m.Config), &cfg); err != nil || cfg.Type != "envoy_proxy" || len(cfg.Config.RootIDs) != 1 || cfg.Config.RootIDs[0] != RootID {
		t.Errorf("config: %+v, %v", cfg, err)
	}
	if d, err := ManifestDigest(img.WasmSHA256, img.WasmSize); err != nil || d != img.Digest {
		t.Errorf("ManifestDigest = %s, %v; the layout's manifest is %s", d, err, img.Digest)
	}
	// The same module, the same bytes: a rebuild is byte for byte the same.
	again, err := WriteLayout(dir, wasm, "v1")
	if err != nil || again != img {
		t.Errorf("rebuild: %+v, %v; want %+v", again, err, img)
	}
}

func TestRejects(t *testing.T) {
	if _, err := WriteLayout(t.TempDir(), []byte("not wasm"), "v1"); err == nil || !strings.Contains(err.Error(), "not WebAssembly") {
		t.Errorf("got %v", err)
	}
	if _, err := ManifestDigest("ABC", 1); err == nil || !strings.Contains(err.Error(), "is not a SHA-256 in lowercase hex") {
		t.Errorf("got %v", err)
	}
}
