// Package dashboard owns the dashboard the accountant serves at /tt/ui/:
// one HTML page, its scripts and its stylesheet, embedded in the binary,
// so it works offline with no CDN and no build step. The page signs in
// with the admin token or a delegated admin token and does everything
// through the management API with that token: spend (GET spend and
// spend/limits), keys (mint, rotate, revoke), limits (overrides, counter
// resets and credits), nodes and the audit log. The server confines and
// checks every call (a delegated admin sees and manages its subtree
// only); the page only draws and asks. The token travels only in the
// Authorization header of the page's own calls, never in a cookie, so no
// other site can make a browser act with it. Charts are plain SVG drawn
// by the page's own script.
package dashboard

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// Prefix is where the dashboard is served.
const Prefix = "/tt/ui/"

//go:embed assets
var assets embed.FS

// files maps a path under Prefix to its content type; nothing else is
// served.
var files = map[string]string{
	"":          "text/html; charset=utf-8",
	"core.js":   "text/javascript; charset=utf-8",
	"app.js":    "text/javascript; charset=utf-8",
	"keys.js":   "text/javascript; charset=utf-8",
	"limits.js": "text/javascript; charset=utf-8",
	"nodes.js":  "text/javascript; charset=utf-8",
	"audit.js":  "text/javascript; charset=utf-8",
	"app.css":   "text/css; charset=utf-8",
	"icon.svg":  "image/svg+xml",
}

// csp allows the page its own script, stylesheet and icon, and calls to
// its own origin; nothing inline, nothing from elsewhere, no framing.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the dashboard under Prefix (GET and HEAD; /tt/ui
// redirects to /tt/ui/).
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	type file struct {
		body       []byte
		ctype, tag string
	}
	served := map[string]file{}
	for name, ctype := range files {
		src := name
		if src == "" {
			src = "index.html"
		}
		b, err := fs.ReadFile(sub, src)
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		served[name] = file{body: b, ctype: ctype, tag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		f, ok := served[name]
		if !ok || path.Clean("/"+name) != "/"+name && name != "" {
			http.Error(w, "not found: the dashboard is "+Prefix, http.StatusNotFound)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.ctype)
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", f.tag)
		if r.Header.Get("If-None-Match") == f.tag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if r.Method == http.MethodHead {
			return
		}
		w.Write(f.body)
	})
}
