package dashboard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestServesOnlyItsAssets: the page, its script, stylesheet and icon with
// a strict content security policy; anything else under /tt/ui/ is 404.
func TestServesOnlyItsAssets(t *testing.T) {
	h := Handler()
	get := func(method, path string, hdr ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	for path, ctype := range map[string]string{"/tt/ui/": "text/html", "/tt/ui/app.js": "text/javascript", "/tt/ui/app.css": "text/css", "/tt/ui/icon.svg": "image/svg+xml"} {
		w := get(http.MethodGet, path)
		if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), ctype) || w.Body.Len() == 0 {
			t.Errorf("%s: %d %s", path, w.Code, w.Header().Get("Content-Type"))
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if w2 := get(http.MethodGet, path, "If-None-Match", w.Header().Get("ETag")); w2.Code != http.StatusNotModified {
			t.Errorf("%s with its ETag: %d", path, w2.Code)
		}
	}
	for _, path := range []string{"/tt/ui/index.html", "/tt/ui/../api/v1/spend", "/tt/ui/assets/app.js", "/tt/ui/x"} {
		if w := get(http.MethodGet, path); w.Code != http.StatusNotFound {
			t.Errorf("%s: %d", path, w.Code)
		}
	}
	if w := get(http.MethodGet, "/tt/ui"); w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != "/tt/ui/" {
		t.Errorf("/tt/ui: %d %s", w.Code, w.Header().Get("Location"))
	}
	// No inline script or style: the CSP would block it.
	page := get(http.MethodGet, "/tt/ui/").Body.String()
	if strings.Contains(page, "<script>") || strings.Contains(page, "style=") || strings.Contains(page, "<style") {
		t.Errorf("the page has inline script or style")
	}
}
