package envoy_test

import (
	"fmt"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	networkingv1 "istio.io/api/networking/v1"
	corev1 "k8s.io/api/core/v1"
)

// clientHeaders are the client's request headers no provider route may
// pass on, each with why and with what may stand in its place.
var clientHeaders = []struct {
	name string
	why  string
	// allowed reports whether a value the route itself sets is fine.
	allowed func(value string) bool
}{
	{
		name:    "accept-encoding",
		why:     "the filter settles on the usage in the response body and cannot read a compressed one",
		allowed: func(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "identity") },
	},
	{
		name:    "authorization",
		why:     "a client credential: the filter strips only a virtual key",
		allowed: notFromRequest,
	},
	{
		name:    "x-api-key",
		why:     "a client credential: the filter strips only a virtual key",
		allowed: notFromRequest,
	},
	{name: "api-key", why: "a client credential (Azure OpenAI's header)", allowed: notFromRequest},
	{name: "x-goog-api-key", why: "a client credential (Google's header)", allowed: notFromRequest},
	{name: "cookie", why: "a client credential (a session)", allowed: notFromRequest},
	{name: "proxy-authorization", why: "a client credential for a proxy", allowed: notFromRequest},
}

// notFromRequest is a value the proxy makes up (a provider key from its
// environment), not one copied from the client's request.
func notFromRequest(v string) bool {
	return !strings.Contains(v, "%REQ(") && !strings.Contains(v, "%REQ_WITHOUT_QUERY(")
}

// headerOps is what one route does to the request headers, gathered from
// every level that applies to it.
type headerOps struct {
	removed map[string]bool
	set     map[string][]string // overwritten: the client's value goes
	added   map[string][]string // appended or added when absent: the client's value stays
}

func newHeaderOps() headerOps {
	return headerOps{removed: map[string]bool{}, set: map[string][]string{}, added: map[string][]string{}}
}

// leaks reports how the client's header name may still reach the
// upstream, or "" when it cannot.
func (o headerOps) leaks(name string, allowed func(string) bool) string {
	switch {
	case !o.removed[name] && len(o.set[name]) == 0 && len(o.added[name]) > 0:
		return "added beside the client's value"
	case !o.removed[name] && len(o.set[name]) == 0:
		return "neither removed nor overwritten"
	}
	for _, vs := range [][]string{o.set[name], o.added[name]} {
		for _, v := range vs {
			if !allowed(v) {
				return fmt.Sprintf("set to %q", v)
			}
		}
	}
	return ""
}

// inject adds what the enabled injectors of injs for which on holds do
// to the headers (each sets its header before the route's removals run,
// as in Envoy) and returns those whose key the route does not remove.
func (o headerOps) inject(injs []injector, on func(injector) bool) []injector {
	var keys []injector
	for _, in := range injs {
		if in.disabled || !on(in) {
			continue
		}
		v := "the credential injector " + in.name
		if in.overwrite {
			o.set[in.header] = append(o.set[in.header], v)
		} else {
			o.added[in.header] = append(o.added[in.header], v)
		}
		if !o.removed[in.header] {
			keys = append(keys, in)
		}
	}
	return keys
}

// check returns one error per client header the route passes on.
func (o headerOps) check(where, removeField string) []error {
	var errs []error
	for _, h := range clientHeaders {
		if why := o.leaks(h.name, h.allowed); why != "" {
			errs = append(errs, fmt.Errorf("%s: the client's %s reaches the provider (%s): add it to %s; %s",
				where, h.name, why, removeField, h.why))
		}
	}
	return errs
}

// envoyHeaderOps gathers a route's request header mutations from the
// route, its virtual host and its route configuration. Envoy removes
// before it adds at each level.
func envoyHeaderOps(rc *routev3.RouteConfiguration, vh *routev3.VirtualHost, r *routev3.Route) headerOps {
	ops := newHeaderOps()
	levels := []struct {
		remove []string
		add    []*corev3.HeaderValueOption
	}{
		{r.GetRequestHeadersToRemove(), r.GetRequestHeadersToAdd()},
		{vh.GetRequestHeadersToRemove(), vh.GetRequestHeadersToAdd()},
		{rc.GetRequestHeadersToRemove(), rc.GetRequestHeadersToAdd()},
	}
	for _, l := range levels {
		for _, h := range l.remove {
			ops.removed[strings.ToLower(h)] = true
		}
		for _, a := range l.add {
			k := strings.ToLower(a.GetHeader().GetKey())
			v := a.GetHeader().GetValue()
			if v == "" {
				v = string(a.GetHeader().GetRawValue())
			}
			switch {
			case a.GetAppendAction() == corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
				a.GetAppendAction() == corev3.HeaderValueOption_OVERWRITE_IF_EXISTS,
				a.GetAppendAction() == corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD && a.GetAppend() != nil && !a.GetAppend().GetValue():
				ops.set[k] = append(ops.set[k], v)
			default:
				ops.added[k] = append(ops.added[k], v)
			}
		}
	}
	return ops
}

// checkEnvoyProviderRoutes checks every route of h that forwards to a
// cluster other than the accountant's: each is a provider route, and none
// may pass on the client's accept-encoding or credentials. A credential
// injector of the chain (injs) sets its header before the router's route
// removals run; the key it sets may reach only the cluster it is for
// (injector.keyCluster). It returns how many routes it checked.
func checkEnvoyProviderRoutes(path string, h *hcmv3.HttpConnectionManager, accountant string, injs []injector) (int, []error) {
	var errs []error
	n := 0
	rc := h.GetRouteConfig()
	for _, vh := range rc.GetVirtualHosts() {
		for i, r := range vh.GetRoutes() {
			ra, ok := r.GetAction().(*routev3.Route_Route)
			if !ok || ra.Route.GetCluster() == accountant {
				continue
			}
			n++
			where := fmt.Sprintf("%s.route_config.virtual_hosts[%s].routes[%d] (%s)", path, vh.GetName(), i, r.GetName())
			ops := envoyHeaderOps(rc, vh, r)
			keys := ops.inject(injs, func(in injector) bool { return strings.HasPrefix(in.path, path+".") })
			errs = append(errs, ops.check(where, "request_headers_to_remove")...)
			for _, in := range keys {
				if c := ra.Route.GetCluster(); in.keyCluster() != c {
					errs = append(errs, fmt.Errorf("%s: the %s key (credential injector %s, header %s) reaches cluster %s: add %s to request_headers_to_remove",
						where, in.secret, in.name, in.header, c, in.header))
				}
			}
		}
	}
	return n, errs
}

// istioHeaderOps gathers what an HTTP route of a VirtualService does to
// the request headers of one destination: the route's own operations and
// the destination's.
func istioHeaderOps(r *networkingv1.HTTPRoute, d *networkingv1.HTTPRouteDestination) headerOps {
	ops := newHeaderOps()
	for _, hs := range []*networkingv1.Headers{r.GetHeaders(), d.GetHeaders()} {
		req := hs.GetRequest()
		for _, k := range req.GetRemove() {
			ops.removed[strings.ToLower(k)] = true
		}
		for k, v := range req.GetSet() {
			ops.set[strings.ToLower(k)] = append(ops.set[strings.ToLower(k)], v)
		}
		for k, v := range req.GetAdd() {
			ops.added[strings.ToLower(k)] = append(ops.added[strings.ToLower(k)], v)
		}
	}
	return ops
}

// serviceHosts are the names a VirtualService destination may give svc.
func serviceHosts(svc *corev1.Service) map[string]bool {
	short := svc.Name + "." + svc.Namespace
	return map[string]bool{svc.Name: true, short: true, short + ".svc": true, short + ".svc.cluster.local": true}
}

// checkIstioProviderRoutes checks every destination of every HTTP route of
// the VirtualServices that is not a Service of the manifests (named by its
// short name or FQDN): none may pass on the client's accept-encoding or
// credentials. It returns how many routes it checked.
//
// The credential injectors the gateway's EnvoyFilters add (injs) set their
// header before the route's removals run, as in Envoy; the key one sets
// may reach only the host of its provider (api.openai.com for
// openai_api_key).
func checkIstioProviderRoutes(vss []located[*networkingv1.VirtualService], clusterHosts map[string]bool, injs []injector) (int, []error) {
	var errs []error
	n := 0
	for _, vs := range vss {
		for i, r := range vs.msg.GetHttp() {
			checked := false
			for j, d := range r.GetRoute() {
				if clusterHosts[d.GetDestination().GetHost()] {
					continue
				}
				checked = true
				where := fmt.Sprintf("%s VirtualService http[%d] (%s) route[%d] to %s", vs.path, i, r.GetName(), j, d.GetDestination().GetHost())
				ops := istioHeaderOps(r, d)
				keys := ops.inject(injs, func(injector) bool { return true })
				errs = append(errs, ops.check(where, "headers.request.remove")...)
				for _, in := range keys {
					if h := d.GetDestination().GetHost(); h != "api."+in.keyCluster()+".com" {
						errs = append(errs, fmt.Errorf("%s: the %s key (credential injector %s, header %s) reaches %s: add %s to headers.request.remove",
							where, in.secret, in.name, in.header, h, in.header))
					}
				}
			}
			if checked {
				n++
			}
		}
	}
	return n, errs
}

// TestProviderRoutesStripClientHeaders checks that the configs have
// provider routes at all, so the rule checkTokentriage and checkIstio
// apply to them cannot hold for want of routes: two in each Envoy config
// (three with the self-hosted route of envoy.yaml), two in the Istio
// manifests.
func TestProviderRoutesStripClientHeaders(t *testing.T) {
	for _, name := range envoyConfigFiles(t) {
		cfg, err := loadEnvoyConfig(readFile(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		total := 0
		for _, h := range cfg.hcms {
			n, errs := checkEnvoyProviderRoutes(h.path, h.msg, "tokentriage_accountant", cfg.injectors)
			total += n
			for _, err := range errs {
				t.Errorf("%s: %v", name, err)
			}
		}
		want := 2
		if name != "envoy-embedded-plan.yaml" {
			want = 3
		}
		if total != want {
			t.Errorf("%s: %d provider routes checked, want %d (anthropic, openai, and self_hosted but in the embedded plan)", name, total, want)
		}
	}
	ms, err := loadManifests(readIstio(t))
	if err != nil {
		t.Fatal(err)
	}
	n, errs := checkIstioProviderRoutes(find[*networkingv1.VirtualService](ms), inClusterHosts(ms), istioInjectors(ms))
	for _, err := range errs {
		t.Error(err)
	}
	if n != 2 {
		t.Errorf("istio: %d provider routes checked, want 2 (anthropic, openai)", n)
	}
}
