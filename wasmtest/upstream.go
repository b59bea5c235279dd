package wasmtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Cluster is where requests go: the proxied upstream, or a cluster the
// filter calls out to by name. Set Handler to serve in process, or URL (a
// base such as "http://127.0.0.1:8791" or "https://api.example.com/prefix")
// to go over the network.
type Cluster struct {
	Handler http.Handler
	URL     string
	// Transport carries URL requests; nil is a *http.Transport of the host's
	// own, tuned for a proxy (keep-alive, many idle connections per host, no
	// transparent decompression).
	Transport http.RoundTripper
	// AutoHostRewrite sends URL's host as the Host header instead of the
	// client's :authority (Envoy's route auto_host_rewrite), as a public
	// provider behind the proxy needs. The filter still sees the client's.
	AutoHostRewrite bool
	// SetHeaders are set on every request sent here, replacing the same
	// names (Envoy's request_headers_to_add with OVERWRITE), after the
	// filter ran: a provider key the client never sees, for example.
	SetHeaders http.Header
}

// target is a resolved Cluster.
type target struct {
	handler     http.Handler      // in process
	rt          http.RoundTripper // over the network
	base        *url.URL
	rewriteHost bool
	set         http.Header
}

func newTarget(c Cluster, name string, def http.RoundTripper) (*target, error) {
	switch {
	case c.Handler != nil && c.URL != "":
		return nil, fmt.Errorf("wasmtest: cluster %q: set Handler or URL, not both", name)
	case c.Handler != nil:
		return &target{handler: c.Handler, set: c.SetHeaders}, nil
	case c.URL != "":
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("wasmtest: cluster %q: URL %q must be an absolute http or https URL such as http://127.0.0.1:8791", name, c.URL)
		}
		u.Path = strings.TrimSuffix(u.Path, "/")
		rt := c.Transport
		if rt == nil {
			rt = def
		}
		return &target{rt: rt, base: u, rewriteHost: c.AutoHostRewrite, set: c.SetHeaders}, nil
	}
	return nil, fmt.Errorf("wasmtest: cluster %q: set Handler (in process) or URL (over the network)", name)
}

// NewProxyTransport is a pooled transport for a proxy, the one URL
// clusters share by default: many idle connections per host, kept as long
// as Envoy keeps them, no transparent decompression.
func NewProxyTransport() *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		// Envoy's cluster idle_timeout default: a connection kept
		// for callouts or the upstream is not dialled again within a
		// request's deadline after a quiet minute and a half.
		IdleConnTimeout:       time.Hour,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     true,
	}
}

// request builds the request sent to the target from a header map in the
// pair format (pseudo-headers :method, :path, :authority, :scheme).
func (t *target) request(ctx context.Context, hdr hmap, body io.ReadCloser, length int64) (*http.Request, error) {
	method, _ := hdr.get(":method")
	if method == "" {
		method = http.MethodGet
	}
	path, _ := hdr.get(":path")
	if path == "" {
		path = "/"
	}
	authority, _ := hdr.get(":authority")
	var u *url.URL
	var err error
	if t.base != nil {
		u, err = url.ParseRequestURI(path)
		if err == nil {
			u.Scheme = t.base.Scheme
			u.Host = t.base.Host
			if t.base.Path != "" {
				u.Path = t.base.Path + u.Path
				if u.RawPath != "" {
					u.RawPath = t.base.EscapedPath() + u.RawPath
				}
			}
		}
	} else {
		u, err = url.ParseRequestURI(path)
		if err == nil {
			u.Scheme = "http"
			u.Host = authority
		}
	}
	if err != nil {
		return nil, fmt.Errorf(":path %q is not a request target: %w", path, err)
	}
	req := &http.Request{
		Method:        method,
		URL:           u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        make(http.Header, len(hdr)),
		Body:          body,
		ContentLength: length,
		Host:          authority,
	}
	if body == http.NoBody {
		req.ContentLength = 0
	}
	hdr.toHeader(req.Header, "host", "content-length")
	for k, vs := range t.set {
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	if t.rewriteHost {
		req.Host = t.base.Host
	}
	return req.WithContext(ctx), nil
}
