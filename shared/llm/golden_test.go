package llm

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite testdata/**/*.golden from the current output")

// checkGolden compares what a test wrote of fixture file with its golden
// file (goldenName), or rewrites that with -update.
func checkGolden(t *testing.T, file string, out *strings.Builder) {
	t.Helper()
	testkit.Golden(t, goldenName(file), []byte(out.String()), *update)
}

// fixture is one testdata input: its file, its bytes and the API path its
// name gives (pathFor).
type fixture struct {
	file, path string
	body       []byte
}

// fixtures reads testdata/dir/*.ext, sorted, failing on an empty folder.
func fixtures(t *testing.T, dir, ext string) []fixture {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/%s/*%s files (%v)", dir, ext, err)
	}
	out := make([]fixture, len(files))
	for i, file := range files {
		body, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = fixture{file: file, path: pathFor(t, file), body: body}
	}
	return out
}

// pathFor maps a testdata file name's prefix to the endpoint path it
// exercises: chat_, completions_, embeddings_, responses_, messages_.
func pathFor(t *testing.T, file string) string {
	t.Helper()
	base := filepath.Base(file)
	for prefix, p := range map[string]string{
		"chat":        "/v1/chat/completions",
		"completions": "/v1/completions",
		"embeddings":  "/v1/embeddings",
		"responses":   "/v1/responses",
		"messages":    "/v1/messages",
	} {
		if strings.HasPrefix(base, prefix+"_") || strings.HasPrefix(base, prefix+".") {
			return p
		}
	}
	t.Fatalf("%s: name must start with chat_, completions_, embeddings_, responses_ or messages_", file)
	return ""
}

func goldenName(file string) string {
	return strings.TrimSuffix(file, filepath.Ext(file)) + ".golden"
}
