package envoy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	credinjv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/credential_injector/v3"
	wasmfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	genericv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/injected_credentials/generic/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	extensionsv1alpha1 "istio.io/api/extensions/v1alpha1"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	networkingv1 "istio.io/api/networking/v1"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	securityv1 "istio.io/api/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/tokentriage/tokentriage/filter"
	"github.com/tokentriage/tokentriage/internal/configfile"
	"github.com/tokentriage/tokentriage/internal/wasmoci"
	"github.com/tokentriage/tokentriage/shared/config"
)

// istioKinds decode the spec of each Istio resource the manifests use, with
// istio.io/api's own protos.
var istioKinds = map[string]func() proto.Message{
	"extensions.istio.io/v1alpha1 WasmPlugin":  func() proto.Message { return &extensionsv1alpha1.WasmPlugin{} },
	"networking.istio.io/v1alpha3 EnvoyFilter": func() proto.Message { return &networkingv1alpha3.EnvoyFilter{} },
	"networking.istio.io/v1 DestinationRule":   func() proto.Message { return &networkingv1.DestinationRule{} },
	"networking.istio.io/v1 Gateway":           func() proto.Message { return &networkingv1.Gateway{} },
	"networking.istio.io/v1 ServiceEntry":      func() proto.Message { return &networkingv1.ServiceEntry{} },
	"networking.istio.io/v1 VirtualService":    func() proto.Message { return &networkingv1.VirtualService{} },
	"security.istio.io/v1 AuthorizationPolicy": func() proto.Message { return &securityv1.AuthorizationPolicy{} },
	"security.istio.io/v1 PeerAuthentication":  func() proto.Message { return &securityv1.PeerAuthentication{} },
}

// kubeKinds decode each Kubernetes object the manifests use into k8s.io/api
// types.
var kubeKinds = map[string]func() any{
	"v1 Namespace":                  func() any { return &corev1.Namespace{} },
	"v1 ServiceAccount":             func() any { return &corev1.ServiceAccount{} },
	"v1 Secret":                     func() any { return &corev1.Secret{} },
	"v1 ConfigMap":                  func() any { return &corev1.ConfigMap{} },
	"v1 Service":                    func() any { return &corev1.Service{} },
	"apps/v1 StatefulSet":           func() any { return &appsv1.StatefulSet{} },
	"policy/v1 PodDisruptionBudget": func() any { return &policyv1.PodDisruptionBudget{} },
}

// istioObject is the envelope of an Istio resource; its spec is decoded
// with protojson.
type istioObject struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       json.RawMessage   `json:"spec"`
}

// manifest is one decoded YAML document.
type manifest struct {
	where string // file#index
	kind  string // "apiVersion Kind"
	meta  metav1.ObjectMeta
	obj   any // the k8s.io/api object, or the istio.io/api spec
}

// loadManifests decodes every document of every file strictly: case-
// sensitive field names, no unknown or duplicate fields, Kubernetes objects
// into k8s.io/api types and Istio specs into istio.io/api protos.
func loadManifests(files map[string][]byte) ([]manifest, error) {
	var out []manifest
	var errs []error
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		for i, doc := range splitDocuments(files[name]) {
			where := fmt.Sprintf("%s#%d", name, i)
			m, err := decodeManifest(doc)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				continue
			}
			if m == nil {
				continue
			}
			m.where = where
			out = append(out, *m)
		}
	}
	return out, errors.Join(errs...)
}

var documentSeparator = regexp.MustCompile(`(?m)^---\s*$`)

func splitDocuments(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range documentSeparator.Split(string(b), -1) {
		docs = append(docs, []byte(d))
	}
	return docs
}

func decodeManifest(doc []byte) (*manifest, error) {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, fmt.Errorf("reading YAML: %w", err)
	}
	if string(js) == "null" {
		return nil, nil // comments only
	}
	var tm metav1.TypeMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return nil, fmt.Errorf("reading apiVersion and kind: %w", err)
	}
	kind := tm.APIVersion + " " + tm.Kind
	if newObj, ok := kubeKinds[kind]; ok {
		obj := newObj()
		if err := strictJSON(js, obj); err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
		return &manifest{kind: kind, meta: *objectMeta(obj), obj: obj}, nil
	}
	if newSpec, ok := istioKinds[kind]; ok {
		var env istioObject
		if err := strictJSON(js, &env); err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
		spec := newSpec()
		if err := (protojson.UnmarshalOptions{}).Unmarshal(env.Spec, spec); err != nil {
			return nil, fmt.Errorf("%s %s: spec: %w", kind, env.Metadata.Name, err)
		}
		return &manifest{kind: kind, meta: env.Metadata, obj: spec}, nil
	}
	return nil, fmt.Errorf("no decoder for %q; add its type to istioKinds or kubeKinds in istio_test.go", kind)
}

// strictJSON decodes as the Kubernetes API server does: field names are
// case-sensitive and unknown or duplicate fields are errors.
func strictJSON(js []byte, v any) error {
	strict, err := kjson.UnmarshalStrict(js, v)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

func objectMeta(obj any) *metav1.ObjectMeta {
	return obj.(interface{ GetObjectMeta() metav1.Object }).GetObjectMeta().(*metav1.ObjectMeta)
}

// istioClusterName is the name Istio gives the outbound cluster of a
// Service port: direction | port | subset | FQDN.
func istioClusterName(svc *corev1.Service, port int32) string {
	return fmt.Sprintf("outbound|%d||%s.%s.svc.cluster.local", port, svc.Name, svc.Namespace)
}

// find returns the decoded objects of one kind.
func find[T any](ms []manifest) []located[T] {
	var out []located[T]
	for _, m := range ms {
		if v, ok := m.obj.(T); ok {
			out = append(out, located[T]{m.where, v})
		}
	}
	return out
}

func metaOf(ms []manifest, where string) metav1.ObjectMeta {
	for _, m := range ms {
		if m.where == where {
			return m.meta
		}
	}
	return metav1.ObjectMeta{}
}

var sha256Hex = regexp.MustCompile(`^[a-f0-9]{64}$`)

// The accountant's command lines in the fleet: DESIGN.md's `tokentriage
// accountant -c FILE --listen ADDR --data DIR`, with --control naming the
// plane's owner on every gateway replica's accountant; --redis (which
// overrides governance.shared_state.redis.addr) and --advertise may be
// given to any. Each flag takes a value.
var (
	accountantPrefix = []string{"tokentriage", "accountant"}
	ownerFlags       = []string{"-c", "--listen", "--data"}
	mirrorFlags      = []string{"-c", "--listen", "--data", "--control"}
	optionalFlags    = []string{"--redis", "--advertise"}
)

// accountantPod is a StatefulSet with a container running the accountant.
type accountantPod struct {
	where string // file#index StatefulSet name
	ss    *appsv1.StatefulSet
	c     corev1.Container
	flags map[string]string
}

func (a accountantPod) owner() bool { _, ok := a.flags["--control"]; return !ok }

// accountantPods finds every container of every StatefulSet whose command
// is `tokentriage accountant …`.
func accountantPods(ms []manifest) []accountantPod {
	var out []accountantPod
	for _, l := range find[*appsv1.StatefulSet](ms) {
		for _, c := range l.msg.Spec.Template.Spec.Containers {
			if len(c.Command) >= 2 && c.Command[0] == accountantPrefix[0] && c.Command[1] == accountantPrefix[1] {
				out = append(out, accountantPod{where: l.path + " " + l.msg.Name, ss: l.msg, c: c, flags: commandFlags(c.Command)})
			}
		}
	}
	return out
}

// mountOf is the volume mounted at dir in container c of pod spec p, and
// whether it is one of the StatefulSet's volumeClaimTemplates.
func mountOf(ss *appsv1.StatefulSet, c corev1.Container, dir string) (v corev1.Volume, claim, ok bool) {
	for _, m := range c.VolumeMounts {
		if path.Clean(m.MountPath) != path.Clean(dir) {
			continue
		}
		for _, v := range ss.Spec.Template.Spec.Volumes {
			if v.Name == m.Name {
				return v, false, true
			}
		}
		for _, t := range ss.Spec.VolumeClaimTemplates {
			if t.Name == m.Name {
				return corev1.Volume{Name: m.Name}, true, true
			}
		}
	}
	return corev1.Volume{}, false, false
}

// envSecret is where container c's variable name comes from, if a Secret.
func envSecret(c corev1.Container, name string) *corev1.SecretKeySelector {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil {
			return e.ValueFrom.SecretKeyRef
		}
	}
	return nil
}

func secretValue(secrets []located[*corev1.Secret], ns, name, key string) (string, bool) {
	for _, s := range secrets {
		if s.msg.Name != name || s.msg.Namespace != ns {
			continue
		}
		if v, ok := s.msg.StringData[key]; ok {
			return v, true
		}
		if v, ok := s.msg.Data[key]; ok {
			return string(v), true
		}
	}
	return "", false
}

// serviceAt resolves a Kubernetes DNS name (name, name.ns, name.ns.svc,
// name.ns.svc.cluster.local) and port, as seen from namespace from, to a
// Service of the manifests and its port.
func serviceAt(ms []manifest, host string, port int32, from string) (*corev1.Service, *corev1.ServicePort) {
	for _, l := range find[*corev1.Service](ms) {
		svc := l.msg
		names := serviceHosts(svc)
		if svc.Namespace != from {
			delete(names, svc.Name)
		}
		if !names[host] {
			continue
		}
		for i, p := range svc.Spec.Ports {
			if p.Port == port {
				return svc, &svc.Spec.Ports[i]
			}
		}
		return svc, nil
	}
	return nil, nil
}

// servedBy is the container, among the StatefulSets the Service selects,
// that has the port the Service port targets.
func servedBy(ms []manifest, svc *corev1.Service, sp *corev1.ServicePort) (*appsv1.StatefulSet, *corev1.Container, *corev1.ContainerPort) {
	for _, l := range find[*appsv1.StatefulSet](ms) {
		if l.msg.Namespace != svc.Namespace || len(svc.Spec.Selector) == 0 {
			continue
		}
		selects := true
		for k, v := range svc.Spec.Selector {
			if l.msg.Spec.Template.Labels[k] != v {
				selects = false
			}
		}
		if !selects {
			continue
		}
		for i := range l.msg.Spec.Template.Spec.Containers {
			c := &l.msg.Spec.Template.Spec.Containers[i]
			for j, p := range c.Ports {
				t := sp.TargetPort.String()
				if t == p.Name || t == fmt.Sprint(p.ContainerPort) {
					return l.msg, c, &c.Ports[j]
				}
			}
		}
	}
	return nil, nil, nil
}

func splitHostPort(addr string) (string, int32, bool) {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return "", 0, false
	}
	var p int32
	if _, err := fmt.Sscanf(addr[i+1:], "%d", &p); err != nil || fmt.Sprint(p) != addr[i+1:] {
		return "", 0, false
	}
	return addr[:i], p, true
}

// checkAccountantPod checks what every accountant of the fleet needs: its
// command line, its config from a mounted ConfigMap that compiles, its
// ledger on a claim of its own (a volumeClaimTemplate, so every replica
// keeps its own ledger across restarts), its tokens from Secrets that
// exist, and the fleet's Redis behind a Service of the manifests.
func checkAccountantPod(ms []manifest, a accountantPod, fail func(string, ...any)) (plan, redis string) {
	want := ownerFlags
	if !a.owner() {
		want = mirrorFlags
	}
	var got []string
	for i := 2; i < len(a.c.Command); i += 2 {
		got = append(got, a.c.Command[i])
	}
	got = slices.DeleteFunc(got, func(f string) bool { return slices.Contains(optionalFlags, f) })
	if len(a.c.Args) != 0 || len(a.c.Command)%2 != 0 || !sameSet(got, want) {
		fail("%s: command %q args %q, want the command %q followed by the flags %v (and optionally %v), each with its value", a.where, a.c.Command, a.c.Args, accountantPrefix, want, optionalFlags)
	}
	ns := a.ss.Namespace

	// -c: a file of a mounted ConfigMap that exists and compiles.
	configFile := a.flags["-c"]
	if v, _, ok := mountOf(a.ss, a.c, path.Dir(configFile)); !ok || v.ConfigMap == nil {
		fail("%s: -c %s: %s is not a mounted ConfigMap volume", a.where, configFile, path.Dir(configFile))
	} else {
		var cm *corev1.ConfigMap
		for _, l := range find[*corev1.ConfigMap](ms) {
			if l.msg.Name == v.ConfigMap.Name && l.msg.Namespace == ns {
				cm = l.msg
			}
		}
		if cm == nil {
			fail("%s: ConfigMap %s/%s is not among the manifests", a.where, ns, v.ConfigMap.Name)
		} else if data, ok := cm.Data[path.Base(configFile)]; !ok {
			fail("%s: ConfigMap %s has no key %q for -c %s", a.where, cm.Name, path.Base(configFile), configFile)
		} else if err := checkConfigYAML([]byte(data)); err != nil {
			fail("ConfigMap %s/%s, %s: %w", ns, cm.Name, path.Base(configFile), err)
		} else {
			plan = data
		}
	}

	// --data: a claim of the replica's own.
	if _, claim, ok := mountOf(a.ss, a.c, a.flags["--data"]); !ok || !claim {
		fail("%s: --data %s is not mounted from one of the StatefulSet's volumeClaimTemplates (each replica's ledger must outlive its pod, on a claim of its own)", a.where, a.flags["--data"])
	}

	if r := a.ss.Spec.PersistentVolumeClaimRetentionPolicy; r != nil &&
		(r.WhenDeleted == appsv1.DeletePersistentVolumeClaimRetentionPolicyType || r.WhenScaled == appsv1.DeletePersistentVolumeClaimRetentionPolicyType) {
		fail("%s: persistentVolumeClaimRetentionPolicy deletes a replica's claim (whenDeleted %s, whenScaled %s): its ledger's acknowledged rows and its fleet identity would go with it; use Retain", a.where, r.WhenDeleted, r.WhenScaled)
	}

	// The tokens, from Secrets that exist.
	for _, env := range []struct{ name, why string }{
		{"TT_ADMIN_TOKEN", "the management API would have no admin"},
		{"TT_ACCOUNTANT_TOKEN", "the accountant does not start without its internal token"},
	} {
		ref := envSecret(a.c, env.name)
		if ref == nil {
			fail("%s: %s does not come from a Secret: %s", a.where, env.name, env.why)
		} else if !secretHasKey(find[*corev1.Secret](ms), ns, ref.Name, ref.Key) {
			fail("%s: %s: Secret %s/%s with key %q is not among the manifests", a.where, env.name, ns, ref.Name, ref.Key)
		}
	}

	// The fleet's Redis: a Service of the manifests in front of a redis
	// container that wants a password, which the accountant sends.
	var rc *config.Redis
	if f, err := configfile.Parse("tokentriage.yaml", []byte(plan)); err == nil && f.Governance != nil && f.Governance.SharedState != nil {
		rc = f.Governance.SharedState.Redis
	}
	addr, from := a.flags["--redis"], "--redis"
	if addr == "" && rc != nil {
		addr, from = rc.Addr, "governance.shared_state.redis.addr"
	}
	if plan == "" {
		return "", ""
	}
	host, port, ok := splitHostPort(addr)
	if !ok {
		fail("%s: %s %q: want HOST:PORT of the fleet's Redis (store: redis and share limits, the fleet's spend totals)", a.where, from, addr)
		return plan, addr
	}
	svc, sp := serviceAt(ms, host, port, ns)
	if svc == nil || sp == nil {
		fail("%s: %s %s: no Service of the manifests answers at that name and port (a managed Redis instead: drop the redis StatefulSet and point the address at it)", a.where, from, addr)
		return plan, addr
	}
	_, c, _ := servedBy(ms, svc, sp)
	if c == nil || !strings.HasPrefix(c.Image, "redis:") {
		fail("%s: %s %s: Service %s/%s port %d does not reach a redis container's port", a.where, from, addr, svc.Namespace, svc.Name, port)
		return plan, addr
	}
	var pass *corev1.SecretKeySelector
	if i := slices.Index(c.Args, "--requirepass"); i >= 0 && i+1 < len(c.Args) {
		if v, ok := strings.CutPrefix(c.Args[i+1], "$("); ok {
			pass = envSecret(*c, strings.TrimSuffix(v, ")"))
		}
	}
	var sent *corev1.SecretKeySelector
	if rc != nil && rc.PasswordEnv != "" {
		sent = envSecret(a.c, rc.PasswordEnv)
	}
	switch {
	case pass == nil:
		fail("Service %s/%s: its redis takes no --requirepass from a Secret: any pod of the cluster could rewrite the fleet's counters", svc.Namespace, svc.Name)
	case rc == nil || rc.PasswordEnv == "":
		fail("%s: Redis %s wants a password and governance.shared_state.redis.password_env names none: every fleet decision would fail (NOAUTH)", a.where, addr)
	case sent == nil:
		fail("%s: %s (governance.shared_state.redis.password_env) does not come from a Secret", a.where, rc.PasswordEnv)
	default:
		secrets := find[*corev1.Secret](ms)
		mine, ok1 := secretValue(secrets, ns, sent.Name, sent.Key)
		theirs, ok2 := secretValue(secrets, svc.Namespace, pass.Name, pass.Key)
		switch {
		case !ok1:
			fail("%s: %s: Secret %s/%s with key %q is not among the manifests", a.where, rc.PasswordEnv, ns, sent.Name, sent.Key)
		case ok2 && mine != theirs:
			fail("%s: %s: Secret %s/%s holds another value than Redis's requirepass (%s/%s)", a.where, rc.PasswordEnv, ns, sent.Name, svc.Namespace, pass.Name)
		}
	}
	return plan, addr
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// checkIstio decodes the manifests and checks that they are the fleet:
// one plane owner (an accountant without --control, one replica, behind an
// HTTP Service); gateway replicas (at least two) each running the filter in
// istio-proxy beside an accountant that mirrors the owner (--control names
// the owner's Service), with its own ledger claim and the cluster the
// filter calls pointing at it; every accountant on the same Redis, with
// the same config, and one internal token across namespaces; the
// WasmPlugin's configuration passes the filter's decode and its pin
// agrees with itself; the Gateway serves TLS only, on a port its Service
// exposes; the provider keys come from a mounted Secret Envoy watches; no
// route to a provider passes on the client's accept-encoding or
// credentials.
func checkIstio(files map[string][]byte) error {
	ms, err := loadManifests(files)
	if err != nil {
		return err
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	secrets := find[*corev1.Secret](ms)

	plugins := istioPlugins(ms)
	if len(plugins) != 1 {
		var where []string
		for _, p := range plugins {
			where = append(where, p.where)
		}
		return fmt.Errorf("want the filter loaded once: one WasmPlugin, or the EnvoyFilter of istio/hold-headers/ instead; found %d %v", len(plugins), where)
	}
	wp := plugins[0]
	errs = append(errs, wp.errs...)
	wpWhere := wp.where

	// The accountants: one owner, mirrors in the gateway pods.
	var owners, mirrors []accountantPod
	for _, a := range accountantPods(ms) {
		if a.owner() {
			owners = append(owners, a)
		} else {
			mirrors = append(mirrors, a)
		}
	}
	if len(owners) != 1 {
		var where []string
		for _, o := range owners {
			where = append(where, o.where)
		}
		return errors.Join(append(errs, fmt.Errorf("want one accountant without --control, the runtime plane's owner; found %d %v", len(owners), where))...)
	}
	owner := owners[0]
	if r := owner.ss.Spec.Replicas; r == nil || *r != 1 {
		fail("%s: want replicas: 1: the runtime plane has one owner (a second replica would be a second owner)", owner.where)
	}
	configs := map[string]string{}
	redis := map[string]string{}
	for _, a := range append([]accountantPod{owner}, mirrors...) {
		c, r := checkAccountantPod(ms, a, fail)
		if c != "" {
			configs[a.where] = c
		}
		redis[a.where] = r
	}

	// The owner's Service: selects it, targets --listen, speaks HTTP.
	_, ownerPort, _ := splitHostPort(owner.flags["--listen"])
	var planeSvc *corev1.Service
	var planePort *corev1.ServicePort
	for _, l := range find[*corev1.Service](ms) {
		for i := range l.msg.Spec.Ports {
			sp := &l.msg.Spec.Ports[i]
			if ss, c, p := servedBy(ms, l.msg, sp); ss == owner.ss && c.Name == owner.c.Name && p.ContainerPort == ownerPort {
				planeSvc, planePort = l.msg, sp
			}
		}
	}
	if planeSvc == nil {
		fail("%s: no Service selects the plane owner's pods with a port targeting its --listen port %d", owner.where, ownerPort)
	} else {
		if planePort.AppProtocol == nil || *planePort.AppProtocol != "http" {
			fail("Service %s/%s: port %d needs appProtocol: http, or Istio treats it as TCP", planeSvc.Namespace, planeSvc.Name, planePort.Port)
		}
		fqdn := fmt.Sprintf("%s.%s.svc.cluster.local", planeSvc.Name, planeSvc.Namespace)
		for _, dr := range find[*networkingv1.DestinationRule](ms) {
			if serviceHosts(planeSvc)[dr.msg.GetHost()] && len(dr.msg.GetSubsets()) > 0 {
				fail("%s: subsets on %s: the mirrors call the plane's Service whole; a subset would leave them calling no pod", dr.path, fqdn)
			}
		}
	}

	// The gateway replicas.
	if len(mirrors) == 0 {
		fail("no accountant with --control: the gateway replicas need an accountant each, mirroring the plane's owner")
	}
	gwLabels := wp.labels
	ownerInternal := envSecret(owner.c, "TT_ACCOUNTANT_TOKEN")
	ownerAdmin := envSecret(owner.c, "TT_ADMIN_TOKEN")
	var gateway *accountantPod
	for i, m := range mirrors {
		if r := m.ss.Spec.Replicas; r == nil || *r < 2 {
			fail("%s: replicas %v: want at least 2, so that losing one replica does not stop the gateway from enforcing", m.where, derefOr(r, 1))
		}
		if c := configs[m.where]; c != "" && configs[owner.where] != "" && c != configs[owner.where] {
			fail("%s: its config differs from the plane owner's (%s): every accountant of the fleet reads the same plan", m.where, owner.where)
		}
		if redis[m.where] != redis[owner.where] {
			fail("%s: Redis at %s, the owner's at %s: the fleet shares one Redis", m.where, redis[m.where], redis[owner.where])
		}
		// --control: the owner's Service, by a name that resolves from here.
		ctl := m.flags["--control"]
		rest, ok := strings.CutPrefix(ctl, "http://")
		host, port, hpOK := splitHostPort(strings.TrimSuffix(rest, "/"))
		if !ok || !hpOK {
			fail("%s: --control %q: want http://HOST:PORT of the plane owner's Service", m.where, ctl)
		} else if svc, sp := serviceAt(ms, host, port, m.ss.Namespace); planeSvc == nil || svc != planeSvc || sp != planePort {
			fail("%s: --control %s does not reach the plane owner: want http://%s.%s.svc.cluster.local:%d", m.where, ctl, planeSvcName(planeSvc), planeSvcNS(planeSvc), portOf(planePort))
		}
		// One internal token and one admin token across the fleet.
		for _, tok := range []struct {
			env   string
			owner *corev1.SecretKeySelector
		}{{"TT_ACCOUNTANT_TOKEN", ownerInternal}, {"TT_ADMIN_TOKEN", ownerAdmin}} {
			mine := envSecret(m.c, tok.env)
			if mine == nil || tok.owner == nil {
				continue
			}
			a, okA := secretValue(secrets, m.ss.Namespace, mine.Name, mine.Key)
			b, okB := secretValue(secrets, owner.ss.Namespace, tok.owner.Name, tok.owner.Key)
			if okA && okB && a != b {
				fail("%s: %s: Secret %s/%s holds another value than the owner's %s/%s: the fleet shares one", m.where, tok.env, m.ss.Namespace, mine.Name, owner.ss.Namespace, tok.owner.Name)
			}
		}
		selected := len(gwLabels) > 0
		for k, v := range gwLabels {
			if m.ss.Spec.Template.Labels[k] != v {
				selected = false
			}
		}
		if selected {
			gateway = &mirrors[i]
		}
	}
	if gateway == nil {
		return errors.Join(append(errs, fmt.Errorf("%s: selector %v selects no gateway StatefulSet with an accountant beside its proxy", wpWhere, gwLabels))...)
	}
	gw := gateway.ss
	if gw.Namespace != wp.ns {
		fail("%s: in namespace %q, the gateway %s in %q: it applies only in its own namespace", wpWhere, wp.ns, gateway.where, gw.Namespace)
	}
	var proxy *corev1.Container
	for i, c := range gw.Spec.Template.Spec.Containers {
		if c.Name == "istio-proxy" {
			proxy = &gw.Spec.Template.Spec.Containers[i]
		}
	}
	if proxy == nil || proxy.Image != "auto" || gw.Spec.Template.Annotations["inject.istio.io/templates"] != "gateway" {
		fail("%s: want a container istio-proxy with image: auto and the annotation inject.istio.io/templates: gateway, so istiod injects the gateway proxy", gateway.where)
	}
	if err := checkProxyStats(gw.Spec.Template.Annotations["proxy.istio.io/config"]); err != nil {
		fail("%s: annotation proxy.istio.io/config: %w", gateway.where, err)
	}
	errs = append(errs, checkAdvertise(*gateway, owner)...)

	// The filter's module and configuration.
	if !strings.HasPrefix(wp.url, "oci://") || !regexp.MustCompile(`:[\w][\w.-]*$|@sha256:[a-f0-9]{64}$`).MatchString(wp.url) {
		fail("%s: url %q: want oci://<registry>/<repo>:<version> (or @sha256:<digest>)", wpWhere, wp.url)
	}
	if s := wp.sha256; s != "" && !sha256Hex.MatchString(s) {
		fail("%s: sha256 %q: want empty or 64 lowercase hex digits (no sha256: prefix)", wpWhere, s)
	} else if err := checkPin(wp.ann, s); err != nil {
		fail("%s: %w", wpWhere, err)
	}
	if wp.failOpen {
		fail("%s: fails open: every request would go through ungoverned when the filter fails; use FAIL_CLOSE or FAIL_RELOAD", wpWhere)
	}
	raw := wp.config
	conf, err := decodePluginConfig(raw)
	if err != nil {
		fail("%s: pluginConfig: the filter would reject its plugin configuration: %w", wpWhere, err)
	} else {
		limit, at, patchErrs := gatewayBufferLimit(ms, gwLabels)
		errs = append(errs, patchErrs...)
		if int64(limit) < conf.MaxBodyBytes {
			fail("%s: the gateway's listener buffer limit is %d (%s), below pluginConfig.max_body_bytes %d: request bodies between the two would get Envoy's bare 413 instead of the filter's; raise it with an EnvoyFilter (buffer-limit.yaml) or lower max_body_bytes",
				wpWhere, limit, at, conf.MaxBodyBytes)
		}
		hostEnv, set := wp.hostEnv, wp.set
		if conf.HoldHeaders && !wp.stopIteration {
			fail("%s: hold_headers is on but allow_on_headers_stop_iteration is not: Envoy would hold the body back from the filter paused at the headers, and every governed request would wait %v before the filter lets it go (a WasmPlugin cannot set the knob: use istio/hold-headers/)", wpWhere, filter.HoldGrace)
		} else if wp.stopIteration && !conf.HoldHeaders {
			fail("%s: allow_on_headers_stop_iteration is on but hold_headers is not: set both or neither", wpWhere)
		}
		if conf.Accountant == nil {
			fail("%s: pluginConfig has no accountant", wpWhere)
		} else {
			if err := checkInternalToken(conf.Accountant, hostEnv, set); err != nil {
				fail("%s: pluginConfig: %w", wpWhere, err)
			}
			// The VM reads the token from the proxy's environment: the
			// same Secret as the replica's accountant.
			if conf.Accountant.TokenEnv != "" && proxy != nil {
				ref, acc := envSecret(*proxy, conf.Accountant.TokenEnv), envSecret(gateway.c, "TT_ACCOUNTANT_TOKEN")
				switch {
				case ref == nil:
					fail("%s: istio-proxy: %s does not come from a Secret: the filter's VM reads the accountant's internal token from it (vmConfig.env valueFrom: HOST)", gateway.where, conf.Accountant.TokenEnv)
				case acc != nil && (*ref != *acc):
					fail("%s: istio-proxy: %s from Secret %s key %q, the accountant's from %s key %q: the filter must send the token its accountant expects", gateway.where, conf.Accountant.TokenEnv, ref.Name, ref.Key, acc.Name, acc.Key)
				}
			}
			_, port, _ := splitHostPort(gateway.flags["--listen"])
			errs = append(errs, checkAccountantCluster(ms, gwLabels, conf.Accountant.Cluster, fmt.Sprintf("127.0.0.1:%d", port), wpWhere)...)
		}
	}

	// The Gateway: TLS only, on a port of the Service in front of the
	// gateway pods.
	gws := find[*networkingv1.Gateway](ms)
	if len(gws) == 0 {
		fail("no Gateway selects the LLM gateway's pods")
	}
	for _, g := range gws {
		for k, v := range g.msg.GetSelector() {
			if gwLabels[k] != v {
				fail("%s: the filter's selector does not select the gateway workload %s=%s of %s", wpWhere, k, v, g.path)
			}
		}
		for i, s := range g.msg.GetServers() {
			where := fmt.Sprintf("%s Gateway servers[%d] (port %d)", g.path, i, s.GetPort().GetNumber())
			mode := s.GetTls().GetMode()
			if s.GetPort().GetProtocol() != "HTTPS" || (mode != networkingv1.ServerTLSSettings_SIMPLE && mode != networkingv1.ServerTLSSettings_MUTUAL) || s.GetTls().GetCredentialName() == "" {
				fail("%s: protocol %s, tls mode %s, credentialName %q: want HTTPS with mode SIMPLE (or MUTUAL) and a credentialName: virtual keys are bearer credentials and must not travel in clear", where, s.GetPort().GetProtocol(), mode, s.GetTls().GetCredentialName())
			}
			if !gatewayServicePort(ms, gw, proxy, int32(s.GetPort().GetNumber())) {
				fail("%s: no Service selecting the gateway's pods has a port %d targeting a port of istio-proxy", where, s.GetPort().GetNumber())
			}
		}
	}

	// Provider keys: the credential injectors read SDS files of a mounted
	// ConfigMap that name files of a mounted Secret, which Envoy watches.
	errs = append(errs, checkIstioProviderKeys(ms, gateway, proxy)...)

	// Routes to a provider pass on neither accept-encoding nor a client
	// credential.
	_, routeErrs := checkIstioProviderRoutes(find[*networkingv1.VirtualService](ms), inClusterHosts(ms), istioInjectors(ms))
	errs = append(errs, routeErrs...)
	return errors.Join(errs...)
}

func derefOr(p *int32, d int32) int32 {
	if p == nil {
		return d
	}
	return *p
}

func planeSvcName(s *corev1.Service) string {
	if s == nil {
		return "<plane>"
	}
	return s.Name
}

func planeSvcNS(s *corev1.Service) string {
	if s == nil {
		return "<namespace>"
	}
	return s.Namespace
}

func portOf(p *corev1.ServicePort) int32 {
	if p == nil {
		return 0
	}
	return p.Port
}

// inClusterHosts are the names of every Service of the manifests: routes
// to them are not provider routes.
func inClusterHosts(ms []manifest) map[string]bool {
	hosts := map[string]bool{}
	for _, s := range find[*corev1.Service](ms) {
		for h := range serviceHosts(s.msg) {
			hosts[h] = true
		}
	}
	return hosts
}

// checkPin checks that the WasmPlugin's sha256 is the digest of the image
// `make oci` builds from the module its annotations name.
func checkPin(ann map[string]string, pinned string) error {
	sha, size := ann["tokentriage.io/filter-wasm-sha256"], ann["tokentriage.io/filter-wasm-size"]
	if sha == "" && size == "" && pinned == "" {
		return nil
	}
	var n int64
	if _, err := fmt.Sscanf(size, "%d", &n); err != nil {
		return fmt.Errorf("annotation tokentriage.io/filter-wasm-size %q: want the module's size in bytes (make oci writes it)", size)
	}
	d, err := wasmoci.ManifestDigest(sha, n)
	if err != nil {
		return fmt.Errorf("annotation tokentriage.io/filter-wasm-sha256 %q: %w", sha, err)
	}
	if "sha256:"+pinned != d {
		return fmt.Errorf("sha256 %q is not the digest of the image of the module the annotations name (%s): run make oci, which pins them together", pinned, d)
	}
	return nil
}

// checkAccountantCluster checks that the cluster the filter calls is one
// an EnvoyFilter selecting the gateway adds, decoding strictly as an Envoy
// Cluster, and that it reaches the replica's accountant at listen.
func checkAccountantCluster(ms []manifest, labels map[string]string, name, listen, wpWhere string) []error {
	var errs []error
	found := false
	for _, ef := range find[*networkingv1alpha3.EnvoyFilter](ms) {
		sel := ef.msg.GetWorkloadSelector().GetLabels()
		selects := len(sel) > 0
		for k, v := range sel {
			if labels[k] != v {
				selects = false
			}
		}
		for i, p := range ef.msg.GetConfigPatches() {
			if p.GetApplyTo() != networkingv1alpha3.EnvoyFilter_CLUSTER || p.GetPatch().GetOperation() != networkingv1alpha3.EnvoyFilter_Patch_ADD {
				continue
			}
			js, err := protojson.Marshal(p.GetPatch().GetValue())
			var c clusterv3.Cluster
			if err == nil {
				err = protojson.Unmarshal(js, &c)
			}
			if err == nil {
				err = c.ValidateAll()
			}
			where := fmt.Sprintf("%s configPatches[%d]", ef.path, i)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: patch.value is not an Envoy Cluster: %w", where, err))
				continue
			}
			if c.GetName() != name {
				continue
			}
			if !selects || p.GetMatch().GetContext() != networkingv1alpha3.EnvoyFilter_GATEWAY {
				errs = append(errs, fmt.Errorf("%s: adds cluster %s, but not to the gateway's proxies (workloadSelector %v, context %s)", where, name, sel, p.GetMatch().GetContext()))
				continue
			}
			found = true
			var addrs []string
			for _, e := range c.GetLoadAssignment().GetEndpoints() {
				for _, lb := range e.GetLbEndpoints() {
					sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
					addrs = append(addrs, fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue()))
				}
			}
			if len(addrs) != 1 || addrs[0] != listen {
				errs = append(errs, fmt.Errorf("%s: cluster %s reaches %v, want the replica's own accountant at %s (its --listen port on loopback)", where, name, addrs, listen))
			}
		}
	}
	if !found {
		errs = append(errs, fmt.Errorf("%s: pluginConfig.accountant.cluster %q: no EnvoyFilter adds that cluster to the gateway's proxies; the filter's callouts would fail", wpWhere, name))
	}
	return errs
}

// gatewayServicePort reports whether a Service selecting the gateway pods
// has port targeting a port of the proxy container.
func gatewayServicePort(ms []manifest, gw *appsv1.StatefulSet, proxy *corev1.Container, port int32) bool {
	if proxy == nil {
		return false
	}
	for _, l := range find[*corev1.Service](ms) {
		svc := l.msg
		if svc.Namespace != gw.Namespace || len(svc.Spec.Selector) == 0 {
			continue
		}
		selects := true
		for k, v := range svc.Spec.Selector {
			if gw.Spec.Template.Labels[k] != v {
				selects = false
			}
		}
		if !selects {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			if sp.Port != port {
				continue
			}
			for _, cp := range proxy.Ports {
				if t := sp.TargetPort.String(); t == cp.Name || t == fmt.Sprint(cp.ContainerPort) {
					return true
				}
			}
		}
	}
	return false
}

// checkIstioProviderKeys checks each credential injector the EnvoyFilters
// give the gateway: its SDS file is a key of a ConfigMap mounted in
// istio-proxy, decoding strictly and naming the injector's secret; that
// secret is read from a file of the watched directory, where a Secret of
// the manifests with that key is mounted, so updating the Secret rotates
// the key without a restart.
func checkIstioProviderKeys(ms []manifest, gateway *accountantPod, proxy *corev1.Container) []error {
	var errs []error
	if proxy == nil {
		return nil
	}
	gw := gateway.ss
	n := 0
	for _, ef := range find[*networkingv1alpha3.EnvoyFilter](ms) {
		for i, p := range ef.msg.GetConfigPatches() {
			if p.GetApplyTo() != networkingv1alpha3.EnvoyFilter_HTTP_FILTER {
				continue
			}
			js, err := protojson.Marshal(p.GetPatch().GetValue())
			var f hcmv3.HttpFilter
			if err == nil {
				err = protojson.Unmarshal(js, &f)
			}
			where := fmt.Sprintf("%s configPatches[%d]", ef.path, i)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: patch.value is not an Envoy HttpFilter: %w", where, err))
				continue
			}
			in, ok := newInjector(where, &f)
			if !ok {
				continue
			}
			n++
			var ci credinjv3.CredentialInjector
			var g genericv3.Generic
			_ = f.GetTypedConfig().UnmarshalTo(&ci)
			_ = ci.GetCredential().GetTypedConfig().UnmarshalTo(&g)
			pcs := g.GetCredential().GetSdsConfig().GetPathConfigSource()
			if pcs == nil {
				errs = append(errs, fmt.Errorf("%s: %s: the secret %q must come from an SDS file (path_config_source)", where, in.name, in.secret))
				continue
			}
			v, _, ok := mountOf(gw, *proxy, path.Dir(pcs.GetPath()))
			var data string
			if ok && v.ConfigMap != nil {
				for _, cm := range find[*corev1.ConfigMap](ms) {
					if cm.msg.Namespace == gw.Namespace && cm.msg.Name == v.ConfigMap.Name {
						data = cm.msg.Data[path.Base(pcs.GetPath())]
					}
				}
			}
			if data == "" {
				errs = append(errs, fmt.Errorf("%s: %s: SDS file %s is not a key of a ConfigMap mounted in istio-proxy", where, in.name, pcs.GetPath()))
				continue
			}
			sec, err := sdsSecretFrom([]byte(data), in.secret)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: SDS file %s: %w", where, in.name, pcs.GetPath(), err))
				continue
			}
			watched := pcs.GetWatchedDirectory().GetPath()
			file := sec.GetGenericSecret().GetSecret().GetFilename()
			sv, _, ok := mountOf(gw, *proxy, watched)
			switch {
			case watched == "":
				errs = append(errs, fmt.Errorf("%s: %s: no watched_directory: a rotated key would need a restart", where, in.name))
			case file == "" || path.Dir(file) != path.Clean(watched):
				errs = append(errs, fmt.Errorf("%s: %s: secret %q is read from %q, not a file of the watched directory %s", where, in.name, in.secret, file, watched))
			case !ok || sv.Secret == nil:
				errs = append(errs, fmt.Errorf("%s: %s: the watched directory %s is not a Secret mounted in istio-proxy", where, in.name, watched))
			case !secretHasKey(find[*corev1.Secret](ms), gw.Namespace, sv.Secret.SecretName, path.Base(file)):
				errs = append(errs, fmt.Errorf("%s: %s: Secret %s/%s has no key %q for %s", where, in.name, gw.Namespace, sv.Secret.SecretName, path.Base(file), file))
			}
		}
	}
	if n == 0 {
		errs = append(errs, errors.New("no credential injector gives the gateway the provider keys"))
	}
	return errs
}

// gatewayBufferLimit is the per_connection_buffer_limit_bytes the gateway
// selected by labels gets on its listeners: the largest an EnvoyFilter
// selecting it merges into every gateway listener, else Envoy's default.
// Each patch value is decoded strictly as an Envoy Listener.
func gatewayBufferLimit(ms []manifest, labels map[string]string) (uint32, string, []error) {
	limit, at := uint32(envoyDefaultBufferLimit), "Envoy's default, no EnvoyFilter raises it"
	var errs []error
	for _, ef := range find[*networkingv1alpha3.EnvoyFilter](ms) {
		sel := ef.msg.GetWorkloadSelector().GetLabels()
		selects := len(sel) > 0
		for k, v := range sel {
			if labels[k] != v {
				selects = false
			}
		}
		if !selects {
			continue
		}
		for i, p := range ef.msg.GetConfigPatches() {
			if p.GetApplyTo() != networkingv1alpha3.EnvoyFilter_LISTENER ||
				p.GetMatch().GetContext() != networkingv1alpha3.EnvoyFilter_GATEWAY ||
				p.GetPatch().GetOperation() != networkingv1alpha3.EnvoyFilter_Patch_MERGE ||
				p.GetMatch().GetListener() != nil {
				continue
			}
			js, err := protojson.Marshal(p.GetPatch().GetValue())
			var l listenerv3.Listener
			if err == nil {
				err = protojson.Unmarshal(js, &l)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s configPatches[%d]: patch.value is not an Envoy Listener: %w", ef.path, i, err))
				continue
			}
			if v := l.GetPerConnectionBufferLimitBytes(); v != nil && v.GetValue() > limit {
				limit, at = v.GetValue(), fmt.Sprintf("%s configPatches[%d]", ef.path, i)
			}
		}
	}
	return limit, at, errs
}

// commandFlags reads the flag values of an argv of the form
// prog subcommand -flag value --flag value …
func commandFlags(argv []string) map[string]string {
	flags := map[string]string{}
	for i := 2; i+1 < len(argv); i += 2 {
		flags[argv[i]] = argv[i+1]
	}
	return flags
}

func hasObject[T interface {
	GetName() string
	GetNamespace() string
}](objs []located[T], ns, name string) bool {
	for _, o := range objs {
		if o.msg.GetName() == name && o.msg.GetNamespace() == ns {
			return true
		}
	}
	return false
}

func secretHasKey(secrets []located[*corev1.Secret], ns, name, key string) bool {
	for _, s := range secrets {
		if s.msg.Name != name || s.msg.Namespace != ns {
			continue
		}
		_, inData := s.msg.Data[key]
		_, inString := s.msg.StringData[key]
		return inData || inString
	}
	return false
}

// readIstio reads every manifest under istio/.
func readIstio(t *testing.T) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("istio", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no manifests under istio/")
	}
	files := map[string][]byte{}
	for _, n := range names {
		files[n] = readFile(t, n)
	}
	return files
}

// checkIstioBreaks replaces old with new in the manifest name (where it
// must stand once) and checks that checkIstio refuses the result with an
// error holding every string of want.
func checkIstioBreaks(t *testing.T, files map[string][]byte, name, old, new string, want []string) {
	t.Helper()
	src := string(files[name])
	if n := strings.Count(src, old); n != 1 {
		t.Fatalf("%s holds %q %d times; the case needs it exactly once", name, old, n)
	}
	broken := maps.Clone(files)
	broken[name] = []byte(strings.Replace(src, old, new, 1))
	err := checkIstio(broken)
	if err == nil {
		t.Fatal("the broken manifests were accepted")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q:\n%v", w, err)
		}
	}
}

// TestIstioManifests decodes every manifest under istio/ strictly and
// checks that they fit together.
func TestIstioManifests(t *testing.T) {
	files := readIstio(t)
	if err := checkIstio(files); err != nil {
		t.Fatal(err)
	}
	ms, _ := loadManifests(files)
	kinds := map[string]int{}
	for _, m := range ms {
		kinds[m.kind]++
	}
	for k := range istioKinds {
		if kinds[k] == 0 {
			t.Errorf("no %s in istio/: remove its decoder or add the resource", k)
		}
	}
	for k := range kubeKinds {
		if kinds[k] == 0 {
			t.Errorf("no %s in istio/: remove its decoder or add the resource", k)
		}
	}
}

// TestIstioRejects breaks one manifest in one place at a time and checks
// that the failure names what is wrong.
func TestIstioRejects(t *testing.T) {
	files := readIstio(t)
	for _, tc := range []struct {
		name, file, old, new string
		want                 []string
	}{
		{
			name: "misspelt WasmPlugin field", file: "wasmplugin.yaml",
			old: "pluginName:", new: "pluginname:",
			want: []string{`unknown field "pluginname"`},
		},
		{
			name: "gateway buffer limit below max_body_bytes", file: "buffer-limit.yaml",
			old: "per_connection_buffer_limit_bytes: 9437184", new: "per_connection_buffer_limit_bytes: 4194304",
			want: []string{"the gateway's listener buffer limit is 4194304", "below pluginConfig.max_body_bytes 8388608"},
		},
		{
			name: "buffer limit patch selecting another workload", file: "buffer-limit.yaml",
			old: "istio: llm-gateway", new: "istio: egressgateway",
			want: []string{"the gateway's listener buffer limit is 1048576 (Envoy's default, no EnvoyFilter raises it)"},
		},
		{
			name: "misspelt field in the buffer limit patch", file: "buffer-limit.yaml",
			old: "per_connection_buffer_limit_bytes:", new: "per_connection_buffer_limit_byte:",
			want: []string{"configPatches[0]: patch.value is not an Envoy Listener", "per_connection_buffer_limit_byte"},
		},
		{
			name: "misspelt field in a StatefulSet", file: "gateway.yaml",
			old: "containerPort: 443", new: "containerport: 443",
			want: []string{`unknown field "spec.template.spec.containers[0].ports[0].containerport"`},
		},
		{
			name: "misspelt field in a DestinationRule", file: "plane.yaml",
			old: "idleTimeout: 300s", new: "idle_timeout_s: 300s",
			want: []string{"DestinationRule", `unknown field "idle_timeout_s"`},
		},
		{
			name: "internal token not passed to the VM", file: "wasmplugin.yaml",
			old: "        valueFrom: HOST\n", new: "        value: \"\"\n",
			want: []string{`accountant.token_env "TT_ACCOUNTANT_TOKEN" is not passed to the VM`},
		},
		{
			name: "no internal token for the owner", file: "plane.yaml",
			old: "            - name: TT_ACCOUNTANT_TOKEN\n", new: "            - name: TT_OTHER\n",
			want: []string{"TT_ACCOUNTANT_TOKEN does not come from a Secret: the accountant does not start without its internal token"},
		},
		{
			name: "gateway proxy without the internal token", file: "gateway.yaml",
			old: "            # The filter reads it from its VM (vmConfig.env, valueFrom: HOST).\n            - name: TT_ACCOUNTANT_TOKEN\n", new: "            - name: TT_OTHER\n",
			want: []string{"istio-proxy: TT_ACCOUNTANT_TOKEN does not come from a Secret"},
		},
		{
			name: "another internal token where the gateway runs", file: "gateway.yaml",
			old: "TT_ACCOUNTANT_TOKEN: replace-with-the-internal-token", new: "TT_ACCOUNTANT_TOKEN: another-token",
			want: []string{"TT_ACCOUNTANT_TOKEN: Secret istio-system/tokentriage-internal holds another value than the owner's tokentriage/tokentriage-internal"},
		},
		{
			name: "plugin that fails open", file: "wasmplugin.yaml",
			old: "  failStrategy: FAIL_CLOSE\n", new: "  failStrategy: FAIL_OPEN\n",
			want: []string{"fails open: every request would go through ungoverned"},
		},
		{
			name: "sha256 with its prefix", file: "wasmplugin.yaml",
			old: `  sha256: "`, new: `  sha256: "sha256:`,
			want: []string{"want empty or 64 lowercase hex digits"},
		},
		{
			name: "pin that is not the image of the module named", file: "wasmplugin.yaml",
			old: `tokentriage.io/filter-wasm-size: "`, new: `tokentriage.io/filter-wasm-size: "1`,
			want: []string{"is not the digest of the image of the module the annotations name", "run make oci"},
		},
		{
			name: "accountant cluster no EnvoyFilter adds", file: "wasmplugin.yaml",
			old: "cluster: tokentriage_accountant", new: "cluster: outbound|8791||tokentriage-plane.tokentriage.svc.cluster.local",
			want: []string{`pluginConfig.accountant.cluster "outbound|8791||tokentriage-plane.tokentriage.svc.cluster.local": no EnvoyFilter adds that cluster`},
		},
		{
			name: "accountant cluster at another port", file: "gateway.yaml",
			old: "port_value: 8791", new: "port_value: 8792",
			want: []string{"cluster tokentriage_accountant reaches [127.0.0.1:8792], want the replica's own accountant at 127.0.0.1:8791"},
		},
		{
			name: "gateway accountant on loopback only", file: "gateway.yaml",
			old: "            - 0.0.0.0:8791\n", new: "            - 127.0.0.1:8791\n",
			want: []string{"--listen 127.0.0.1:8791: the plane's owner cannot reach this accountant for its share of a spend report"},
		},
		{
			name: "gateway accountant that announces no pod address", file: "gateway.yaml",
			old: "            - --advertise\n            - http://$(POD_IP):8791\n", new: "",
			want: []string{`--advertise "": want http://$(POD_IP):8791 with POD_IP from the pod's status.podIP`},
		},
		{
			name: "owner whose sidecar takes its calls to the replicas", file: "plane.yaml",
			old: `traffic.sidecar.istio.io/excludeOutboundPorts: "8791"`, new: `traffic.sidecar.istio.io/excludeOutboundPorts: "6379"`,
			want: []string{`annotation traffic.sidecar.istio.io/excludeOutboundPorts "6379" lacks 8791`},
		},
		{
			name: "owner command with a misspelt flag", file: "plane.yaml",
			old: "- --listen\n", new: "- --listn\n",
			want: []string{"want the command", "--listen"},
		},
		{
			name: "gateway accountant without --control", file: "gateway.yaml",
			old: "            - --control\n            - http://tokentriage-plane.tokentriage.svc.cluster.local:8791\n", new: "",
			want: []string{"want one accountant without --control, the runtime plane's owner; found 2"},
		},
		{
			name: "--control that misses the owner", file: "gateway.yaml",
			old: "http://tokentriage-plane.tokentriage.svc.cluster.local:8791", new: "http://tokentriage-plane:8791",
			want: []string{"--control http://tokentriage-plane:8791 does not reach the plane owner: want http://tokentriage-plane.tokentriage.svc.cluster.local:8791"},
		},
		{
			name: "ledger not on a claim of its own", file: "gateway.yaml",
			old: "            - name: ledger\n              mountPath: /var/lib/tokentriage\n", new: "            - name: tmp\n              mountPath: /var/lib/tokentriage\n",
			want: []string{"--data /var/lib/tokentriage is not mounted from one of the StatefulSet's volumeClaimTemplates"},
		},
		{
			name: "claims deleted on scale-down", file: "gateway.yaml",
			old: "    whenScaled: Retain\n", new: "    whenScaled: Delete\n",
			want: []string{"persistentVolumeClaimRetentionPolicy deletes a replica's claim (whenDeleted Retain, whenScaled Delete)"},
		},
		{
			name: "one gateway replica", file: "gateway.yaml",
			old: "  replicas: 3\n", new: "  replicas: 1\n",
			want: []string{"want at least 2, so that losing one replica does not stop the gateway from enforcing"},
		},
		{
			name: "two plane owners", file: "plane.yaml",
			old: "  replicas: 1\n  serviceName: tokentriage-plane\n", new: "  replicas: 2\n  serviceName: tokentriage-plane\n",
			want: []string{"want replicas: 1: the runtime plane has one owner"},
		},
		{
			name: "admin token Secret key that does not exist", file: "plane.yaml",
			old: "key: admin-token", new: "key: token",
			want: []string{`TT_ADMIN_TOKEN: Secret tokentriage/tokentriage-admin with key "token"`},
		},
		{
			name: "governance config in the ConfigMap that does not decode", file: "plane.yaml",
			old: "attach: { level: org }", new: "atach: { level: org }",
			want: []string{"ConfigMap tokentriage/tokentriage-config", "atach"},
		},
		{
			name: "gateway config that differs from the owner's", file: "gateway.yaml",
			old: "amount_usd: 1000", new: "amount_usd: 2000",
			want: []string{"its config differs from the plane owner's"},
		},
		{
			name: "gateway on another Redis", file: "gateway.yaml",
			old: "            - --data\n", new: "            - --redis\n            - redis.example.com:6379\n            - --data\n",
			want: []string{"--redis redis.example.com:6379: no Service of the manifests answers", "Redis at redis.example.com:6379, the owner's at tokentriage-redis.tokentriage.svc.cluster.local:6379: the fleet shares one Redis"},
		},
		{
			name: "Redis without a password", file: "plane.yaml",
			old: `, "--requirepass", "$(REDIS_PASSWORD)"]`, new: `]`,
			want: []string{"its redis takes no --requirepass from a Secret"},
		},
		{
			name: "accountant that sends no Redis password", file: "gateway.yaml",
			old: "            # governance.shared_state.redis.password_env\n            - name: TT_REDIS_PASSWORD\n", new: "            - name: TT_OTHER\n",
			want: []string{"TT_REDIS_PASSWORD (governance.shared_state.redis.password_env) does not come from a Secret"},
		},
		{
			name: "gateway with another Redis password", file: "gateway.yaml",
			old: "password: replace-with-the-redis-password", new: "password: another",
			want: []string{"TT_REDIS_PASSWORD: Secret istio-system/tokentriage-redis holds another value than Redis's requirepass (tokentriage/tokentriage-redis)"},
		},
		{
			name: "Redis Service in front of no redis", file: "plane.yaml",
			old: "      targetPort: redis\n", new: "      targetPort: http\n",
			want: []string{"does not reach a redis container's port"},
		},
		{
			name: "subset on the plane's DestinationRule", file: "plane.yaml",
			old:  "  trafficPolicy:\n    tls:\n      mode: ISTIO_MUTUAL\n",
			new:  "  subsets:\n    - name: v1\n      labels: { app: tokentriage-plane }\n  trafficPolicy:\n    tls:\n      mode: ISTIO_MUTUAL\n",
			want: []string{"subsets on tokentriage-plane.tokentriage.svc.cluster.local"},
		},
		{
			name: "plane Service port Istio would treat as TCP", file: "plane.yaml",
			old: "      appProtocol: http\n", new: "\n",
			want: []string{"needs appProtocol: http"},
		},
		{
			name: "Gateway that serves in clear", file: "providers.yaml",
			old: "        protocol: HTTPS\n", new: "        protocol: HTTP\n",
			want: []string{"virtual keys are bearer credentials and must not travel in clear"},
		},
		{
			name: "Gateway port the Service does not expose", file: "gateway.yaml",
			old: "      port: 443\n      targetPort: 443\n", new: "      port: 8443\n      targetPort: 443\n",
			want: []string{"no Service selecting the gateway's pods has a port 443"},
		},
		{
			name: "provider key outside the watched directory", file: "gateway.yaml",
			old: "filename: /etc/tokentriage/secrets/openai-api-key", new: "filename: /etc/tokentriage/openai-api-key",
			want: []string{`secret "openai_api_key" is read from "/etc/tokentriage/openai-api-key", not a file of the watched directory /etc/tokentriage/secrets`},
		},
		{
			name: "provider key the Secret does not hold", file: "gateway.yaml",
			old: "  openai-api-key: replace-with-the-openai-key", new: "  openai-key: replace-with-the-openai-key",
			want: []string{`Secret istio-system/llm-provider-keys has no key "openai-api-key"`},
		},
		{
			name: "gateway that drops the filter's stats", file: "gateway.yaml",
			old: `inclusionRegexps: [".*tokentriage.*"]`, new: `inclusionRegexps: ["tokentriage_.*"]`,
			want: []string{"proxyStatsMatcher keeps no stat named like wasmcustom.limit_id=.=team_rpm"},
		},
		{
			name: "gateway that keeps the limit in the stat name", file: "gateway.yaml",
			old: "extraStatTags: [limit_id, limit_type]", new: "extraStatTags: [limit_type]",
			want: []string{"extraStatTags lacks limit_id"},
		},
		{
			name: "provider route that passes accept-encoding on", file: "providers.yaml",
			old: "remove: [authorization, api-key, x-goog-api-key, cookie, proxy-authorization, accept-encoding]", new: "remove: [authorization, api-key, x-goog-api-key, cookie, proxy-authorization]",
			want: []string{"http[0] (anthropic) route[0] to api.anthropic.com: the client's accept-encoding reaches the provider (neither removed nor overwritten): add it to headers.request.remove"},
		},
		{
			name: "openai route that passes the Anthropic key on", file: "providers.yaml",
			old: "remove: [x-api-key, api-key, x-goog-api-key, cookie, proxy-authorization, accept-encoding]", new: "remove: [api-key, x-goog-api-key, cookie, proxy-authorization, accept-encoding]",
			want: []string{"http[1] (openai) route[0] to api.openai.com: the anthropic_api_key key (credential injector anthropic_key, header x-api-key) reaches api.openai.com"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkIstioBreaks(t, files, filepath.Join("istio", tc.file), tc.old, tc.new, tc.want)
		})
	}
}

// istioInjectors are the credential injectors the EnvoyFilters add.
func istioInjectors(ms []manifest) []injector {
	var out []injector
	for _, ef := range find[*networkingv1alpha3.EnvoyFilter](ms) {
		for i, p := range ef.msg.GetConfigPatches() {
			if p.GetApplyTo() != networkingv1alpha3.EnvoyFilter_HTTP_FILTER {
				continue
			}
			js, err := protojson.Marshal(p.GetPatch().GetValue())
			var f hcmv3.HttpFilter
			if err != nil || protojson.Unmarshal(js, &f) != nil {
				continue // checkIstioProviderKeys names it
			}
			if in, ok := newInjector(fmt.Sprintf("%s configPatches[%d]", ef.path, i), &f); ok {
				out = append(out, in)
			}
		}
	}
	return out
}

// checkProxyStats checks the gateway pods' proxy config (Istio's
// ProxyConfig, decoded strictly): the filter's stats are kept
// (proxyStatsMatcher) and its tags extracted (extraStatTags, for which
// Istio's bootstrap adds the rule `(TAG=\.=(.*?);\.;)`, the spelling
// filter.RefusalStat uses), so a limit id is a Prometheus label.
func checkProxyStats(src string) error {
	if src == "" {
		return errors.New("missing: without it Istio drops the filter's stats (only its own are kept by default)")
	}
	js, err := yaml.YAMLToJSONStrict([]byte(src))
	if err != nil {
		return fmt.Errorf("reading YAML: %w", err)
	}
	var pc meshv1alpha1.ProxyConfig
	if err := protojson.Unmarshal(js, &pc); err != nil {
		return fmt.Errorf("not an Istio ProxyConfig: %w", err)
	}
	for _, tag := range filter.StatTags {
		if !slices.Contains(pc.GetExtraStatTags(), tag.Name) {
			return fmt.Errorf("extraStatTags lacks %s: the refusal stats would keep it in their names instead of a label", tag.Name)
		}
	}
	name := "wasmcustom." + filter.RefusalStat("team_rpm", "rpm")
	m := pc.GetProxyStatsMatcher()
	kept := slices.ContainsFunc(m.GetInclusionPrefixes(), func(p string) bool { return strings.HasPrefix(name, p) }) ||
		slices.ContainsFunc(m.GetInclusionSuffixes(), func(p string) bool { return strings.HasSuffix(name, p) })
	for _, re := range m.GetInclusionRegexps() {
		if r, err := regexp.Compile("^(?:" + re + ")$"); err == nil && r.MatchString(name) {
			kept = true
		}
	}
	if !kept {
		return fmt.Errorf("proxyStatsMatcher keeps no stat named like %s", name)
	}
	return nil
}

// checkAdvertise checks that the plane's owner can reach a gateway
// replica's accountant for its share of a spend report: the accountant
// listens beyond loopback (the filter still calls it on 127.0.0.1) and
// announces the pod's address (--advertise http://$(POD_IP):PORT, POD_IP
// from the pod's status), which the owner calls past its sidecar. Without
// that the accountant announces its --listen, and an owner calling
// 127.0.0.1 would ask itself.
func checkAdvertise(m, owner accountantPod) []error {
	var errs []error
	host, port, ok := splitHostPort(m.flags["--listen"])
	if !ok {
		return []error{fmt.Errorf("%s: --listen %q: want HOST:PORT", m.where, m.flags["--listen"])}
	}
	if host != "0.0.0.0" && host != "" && host != "[::]" {
		errs = append(errs, fmt.Errorf("%s: --listen %s: the plane's owner cannot reach this accountant for its share of a spend report; listen on 0.0.0.0 (the filter calls it on 127.0.0.1) and --advertise the pod's address", m.where, m.flags["--listen"]))
	}
	adv := m.flags["--advertise"]
	want := fmt.Sprintf(":%d", port)
	rest, okScheme := strings.CutPrefix(adv, "http://")
	if r, ok := strings.CutPrefix(rest, "["); ok { // an IPv6 pod address
		rest = strings.Replace(r, ")]:", "):", 1)
	}
	v, okVar := strings.CutPrefix(rest, "$(")
	v, okPort := strings.CutSuffix(v, ")"+want)
	var fromIP bool
	for _, e := range m.c.Env {
		if e.Name == v && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP" {
			fromIP = true
		}
	}
	if !okScheme || !okVar || !okPort || !fromIP {
		errs = append(errs, fmt.Errorf("%s: --advertise %q: want http://$(POD_IP)%s with POD_IP from the pod's status.podIP, the address the plane's owner asks for this replica's share of a spend report", m.where, adv, want))
	}
	ann := owner.ss.Spec.Template.Annotations["traffic.sidecar.istio.io/excludeOutboundPorts"]
	if !slices.Contains(strings.Split(strings.ReplaceAll(ann, " ", ""), ","), fmt.Sprint(port)) {
		errs = append(errs, fmt.Errorf("%s: annotation traffic.sidecar.istio.io/excludeOutboundPorts %q lacks %d: the owner's sidecar would handle its calls to the gateway replicas' accountants, which are no mesh service", owner.where, ann, port))
	}
	return errs
}

// istioPlugin is the filter as the gateway's proxies load it: from a
// WasmPlugin, or from an EnvoyFilter (istio/hold-headers/: the Wasm
// filter's config delivered by extension config discovery, which can set
// what a WasmPlugin cannot, allow_on_headers_stop_iteration).
type istioPlugin struct {
	where, ns     string
	labels        map[string]string
	url, sha256   string
	ann           map[string]string
	failOpen      bool
	config        []byte // the plugin configuration as the filter reads it
	hostEnv       []string
	set           map[string]string
	stopIteration bool
	errs          []error // what is wrong with its form
}

func istioPlugins(ms []manifest) []istioPlugin {
	var out []istioPlugin
	for _, l := range find[*extensionsv1alpha1.WasmPlugin](ms) {
		meta := metaOf(ms, l.path)
		spec := l.msg
		p := istioPlugin{where: l.path + " " + meta.Name, ns: meta.Namespace, labels: spec.GetSelector().GetMatchLabels(),
			url: spec.GetUrl(), sha256: spec.GetSha256(), ann: meta.Annotations, set: map[string]string{},
			failOpen: spec.GetFailStrategy() == extensionsv1alpha1.FailStrategy_FAIL_OPEN}
		if spec.GetPhase() == extensionsv1alpha1.PluginPhase_UNSPECIFIED_PHASE {
			p.errs = append(p.errs, fmt.Errorf("%s: phase: set it, so the filter's place relative to Istio's authn, authz and stats filters is chosen, not left to istiod", p.where))
		}
		if spec.GetType() != extensionsv1alpha1.PluginType_HTTP {
			p.errs = append(p.errs, fmt.Errorf("%s: type %s, want HTTP", p.where, spec.GetType()))
		}
		if spec.GetPluginName() == "" {
			p.errs = append(p.errs, fmt.Errorf("%s: pluginName is empty", p.where))
		}
		// Istio hands pluginConfig to the filter as the protojson
		// rendering of its Struct; decode exactly that.
		raw, err := protojson.Marshal(spec.GetPluginConfig())
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("%s: pluginConfig: %w", p.where, err))
		}
		p.config = raw
		for _, e := range spec.GetVmConfig().GetEnv() {
			if e.GetValueFrom() == extensionsv1alpha1.EnvValueSource_HOST {
				p.hostEnv = append(p.hostEnv, e.GetName())
			} else {
				p.set[e.GetName()] = e.GetValue()
			}
		}
		out = append(out, p)
	}
	for _, ef := range find[*networkingv1alpha3.EnvoyFilter](ms) {
		meta := metaOf(ms, ef.path)
		filters := map[string]string{} // config discovery name -> where
		for i, cp := range ef.msg.GetConfigPatches() {
			if cp.GetApplyTo() != networkingv1alpha3.EnvoyFilter_HTTP_FILTER {
				continue
			}
			js, err := protojson.Marshal(cp.GetPatch().GetValue())
			var f hcmv3.HttpFilter
			if err != nil || protojson.Unmarshal(js, &f) != nil || f.GetConfigDiscovery() == nil {
				continue
			}
			where := fmt.Sprintf("%s configPatches[%d]", ef.path, i)
			cd := f.GetConfigDiscovery()
			if !slices.Contains(cd.GetTypeUrls(), "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm") || cd.GetConfigSource().GetAds() == nil {
				continue
			}
			if cp.GetMatch().GetContext() != networkingv1alpha3.EnvoyFilter_GATEWAY || cp.GetPatch().GetOperation() != networkingv1alpha3.EnvoyFilter_Patch_INSERT_BEFORE ||
				cp.GetMatch().GetListener().GetFilterChain().GetFilter().GetSubFilter().GetName() != "envoy.filters.http.router" {
				filters[f.GetName()] = where + ": want context GATEWAY, operation INSERT_BEFORE the router (envoy.filters.http.router)"
				continue
			}
			filters[f.GetName()] = ""
		}
		for i, cp := range ef.msg.GetConfigPatches() {
			if cp.GetApplyTo() != networkingv1alpha3.EnvoyFilter_EXTENSION_CONFIG {
				continue
			}
			where := fmt.Sprintf("%s configPatches[%d]", ef.path, i)
			p := istioPlugin{where: where, ns: meta.Namespace, labels: ef.msg.GetWorkloadSelector().GetLabels(), ann: meta.Annotations, set: map[string]string{}}
			js, err := protojson.Marshal(cp.GetPatch().GetValue())
			var tec corev3.TypedExtensionConfig
			if err == nil {
				err = protojson.Unmarshal(js, &tec)
			}
			var w wasmfilterv3.Wasm
			if err == nil {
				err = tec.GetTypedConfig().UnmarshalTo(&w)
			}
			if err == nil {
				err = w.ValidateAll()
			}
			if err != nil {
				p.errs = append(p.errs, fmt.Errorf("%s: patch.value is not an Envoy Wasm filter's extension config: %w", where, err))
				out = append(out, p)
				continue
			}
			p.where = where + " " + tec.GetName()
			pc := w.GetConfig()
			vm := pc.GetVmConfig()
			remote := vm.GetCode().GetRemote()
			p.url, p.sha256 = remote.GetHttpUri().GetUri(), remote.GetSha256()
			p.failOpen = pc.GetFailOpen() || pc.GetFailurePolicy() == wasmv3.FailurePolicy_FAIL_OPEN
			p.stopIteration = pc.GetAllowOnHeadersStopIteration().GetValue()
			p.hostEnv = vm.GetEnvironmentVariables().GetHostEnvKeys()
			for k, v := range vm.GetEnvironmentVariables().GetKeyValues() {
				p.set[k] = v
			}
			if raw, err := pluginConfiguration(&w); err != nil {
				p.errs = append(p.errs, fmt.Errorf("%s.%w", p.where, err))
			} else {
				p.config = raw
			}
			if vm.GetRuntime() != wasmRuntime || vm.GetVmId() != wasmVMID {
				p.errs = append(p.errs, fmt.Errorf("%s: vm_config runtime %q vm_id %q, want %q and %q", p.where, vm.GetRuntime(), vm.GetVmId(), wasmRuntime, wasmVMID))
			}
			// Filters inserted before the router run in the order their
			// patches are applied (lower priority first; each lands after
			// those inserted before it): this one must be applied before
			// every credential injector's, so
			// that the filter reads the virtual key before they overwrite
			// authorization and x-api-key with a provider key.
			for _, other := range find[*networkingv1alpha3.EnvoyFilter](ms) {
				if other.msg == ef.msg || len(istioInjectors([]manifest{{where: other.path, obj: other.msg}})) == 0 {
					continue
				}
				if other.msg.GetPriority() <= ef.msg.GetPriority() {
					p.errs = append(p.errs, fmt.Errorf("%s: priority %d, and %s, which adds credential injectors before the router too, has %d: the injectors could run first and write a provider key over the virtual key; give this EnvoyFilter a lower priority", p.where, ef.msg.GetPriority(), other.path, other.msg.GetPriority()))
				}
			}
			if why, ok := filters[tec.GetName()]; !ok {
				p.errs = append(p.errs, fmt.Errorf("%s: no HTTP filter of the EnvoyFilter names it by config discovery (ads, the Wasm type url): the gateway would never run it", p.where))
			} else if why != "" {
				p.errs = append(p.errs, errors.New(why))
			}
			out = append(out, p)
		}
	}
	return out
}

// holdHeadersFiles are the Istio manifests with istio/hold-headers/'s
// EnvoyFilter in place of the WasmPlugin.
func holdHeadersFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := readIstio(t)
	delete(files, filepath.Join("istio", "wasmplugin.yaml"))
	name := filepath.Join("istio", "hold-headers", "filter.yaml")
	files[name] = readFile(t, name)
	return files
}

// TestIstioHoldHeaders checks istio/hold-headers/: with its EnvoyFilter in
// place of the WasmPlugin the manifests are still the fleet, the filter
// holds the headers with Envoy's knob set, and it loads the same module
// with the same configuration as the WasmPlugin but for hold_headers.
func TestIstioHoldHeaders(t *testing.T) {
	files := holdHeadersFiles(t)
	if err := checkIstio(files); err != nil {
		t.Fatal(err)
	}
	ms, err := loadManifests(files)
	if err != nil {
		t.Fatal(err)
	}
	wps, err := loadManifests(map[string][]byte{"wasmplugin.yaml": readIstio(t)[filepath.Join("istio", "wasmplugin.yaml")]})
	if err != nil {
		t.Fatal(err)
	}
	held, plain := istioPlugins(ms), istioPlugins(wps)
	if len(held) != 1 || len(plain) != 1 {
		t.Fatalf("%d and %d plugins", len(held), len(plain))
	}
	h, p := held[0], plain[0]
	if h.url != p.url || h.sha256 != p.sha256 || !maps.Equal(h.ann, p.ann) {
		t.Errorf("%s loads %s (sha256 %s, %v), the WasmPlugin %s (sha256 %s, %v): make oci pins both", h.where, h.url, h.sha256, h.ann, p.url, p.sha256, p.ann)
	}
	hc, err1 := decodePluginConfig(h.config)
	pc, err2 := decodePluginConfig(p.config)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if !hc.HoldHeaders || pc.HoldHeaders {
		t.Errorf("hold_headers %v here, %v in the WasmPlugin; want true and false", hc.HoldHeaders, pc.HoldHeaders)
	}
	hc.HoldHeaders = false
	if !reflect.DeepEqual(hc, pc) {
		t.Errorf("the plugin configurations differ beyond hold_headers:\n%+v\n%+v", hc, pc)
	}
	if !slices.Equal(h.hostEnv, p.hostEnv) {
		t.Errorf("host environment %v here, %v in the WasmPlugin", h.hostEnv, p.hostEnv)
	}

	name := filepath.Join("istio", "hold-headers", "filter.yaml")
	for _, tc := range []struct {
		name, old, new string
		want           []string
	}{
		{"knob off", "allow_on_headers_stop_iteration: true", "allow_on_headers_stop_iteration: false",
			[]string{"hold_headers is on but allow_on_headers_stop_iteration is not"}},
		{"HTTP filter naming another config", "          name: istio-system.tokentriage\n          config_discovery:", "          name: istio-system.other\n          config_discovery:",
			[]string{"no HTTP filter of the EnvoyFilter names it by config discovery"}},
		{"HTTP filter after the router", "operation: INSERT_BEFORE", "operation: INSERT_AFTER",
			[]string{"want context GATEWAY, operation INSERT_BEFORE the router"}},
		{"applied after the credential injectors", "  priority: -10\n", "",
			[]string{"priority 0, and istio/providers.yaml#2, which adds credential injectors before the router too, has 0"}},
		{"fails open", "failure_policy: FAIL_CLOSED", "failure_policy: FAIL_OPEN",
			[]string{"fails open"}},
		{"another VM", "vm_id: tokentriage", "vm_id: other",
			[]string{`vm_id "other"`}},
		{"misspelt Wasm field", "allow_on_headers_stop_iteration: true", "allow_on_header_stop_iteration: true",
			[]string{"is not an Envoy Wasm filter's extension config", "allow_on_header_stop_iteration"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkIstioBreaks(t, files, name, tc.old, tc.new, tc.want)
		})
	}
	// Beside the WasmPlugin, the filter would run twice.
	both := maps.Clone(files)
	both[filepath.Join("istio", "wasmplugin.yaml")] = readIstio(t)[filepath.Join("istio", "wasmplugin.yaml")]
	if err := checkIstio(both); err == nil || !strings.Contains(err.Error(), "want the filter loaded once") {
		t.Errorf("both applied: %v", err)
	}
}
