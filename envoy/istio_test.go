package envoy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	extensionsv1alpha1 "istio.io/api/extensions/v1alpha1"
	networkingv1 "istio.io/api/networking/v1"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	securityv1 "istio.io/api/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The accountant's command line in the Deployment: DESIGN.md's
// `tokentriage accountant -c FILE --listen ADDR --data DIR`.
var accountantCommand = []string{
	"tokentriage", "accountant",
	"-c", "/etc/tokentriage/tokentriage.yaml",
	"--listen", "0.0.0.0:8791",
	"--data", "/var/lib/tokentriage",
}

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
}

// kubeKinds decode each Kubernetes object the manifests use into k8s.io/api
// types.
var kubeKinds = map[string]func() any{
	"v1 Namespace":             func() any { return &corev1.Namespace{} },
	"v1 ServiceAccount":        func() any { return &corev1.ServiceAccount{} },
	"v1 Secret":                func() any { return &corev1.Secret{} },
	"v1 ConfigMap":             func() any { return &corev1.ConfigMap{} },
	"v1 PersistentVolumeClaim": func() any { return &corev1.PersistentVolumeClaim{} },
	"v1 Service":               func() any { return &corev1.Service{} },
	"apps/v1 Deployment":       func() any { return &appsv1.Deployment{} },
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

// checkIstio decodes the manifests and checks that they fit together: the
// WasmPlugin's plugin configuration passes the filter's decode and names
// the cluster Istio builds for the accountant's Service; the Deployment
// runs the accountant's command line with its config, data volume, port
// and admin token wired to objects that exist; the config in the ConfigMap
// compiles; no route to a provider passes on the client's accept-encoding
// or credentials.
func checkIstio(files map[string][]byte) error {
	ms, err := loadManifests(files)
	if err != nil {
		return err
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	services := find[*corev1.Service](ms)
	deployments := find[*appsv1.Deployment](ms)
	plugins := find[*extensionsv1alpha1.WasmPlugin](ms)
	if len(services) != 1 || len(deployments) != 1 || len(plugins) != 1 {
		return fmt.Errorf("want one accountant Service, one Deployment and one WasmPlugin; found %d, %d and %d", len(services), len(deployments), len(plugins))
	}
	svc, dep, wp := services[0].msg, deployments[0].msg, plugins[0]

	// The accountant Deployment.
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		return fmt.Errorf("%s: %d containers, want the accountant alone", deployments[0].path, len(pod.Containers))
	}
	c := pod.Containers[0]
	where := deployments[0].path + " " + dep.Name
	if strings.Join(c.Command, " ") != strings.Join(accountantCommand, " ") || len(c.Args) != 0 {
		fail("%s: command %q args %q, want the command %q", where, c.Command, c.Args, accountantCommand)
	}
	flags := commandFlags(c.Command)
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 || dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		fail("%s: want replicas: 1 and strategy Recreate (the ledger has one writer)", where)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	mountOf := func(dir string) (corev1.Volume, bool) {
		for _, m := range c.VolumeMounts {
			if m.MountPath == dir {
				v, ok := volumes[m.Name]
				return v, ok
			}
		}
		return corev1.Volume{}, false
	}

	// -c: a file of a mounted ConfigMap that exists and compiles.
	configFile := flags["-c"]
	if v, ok := mountOf(path.Dir(configFile)); !ok || v.ConfigMap == nil {
		fail("%s: -c %s: %s is not a mounted ConfigMap volume", where, configFile, path.Dir(configFile))
	} else {
		var cm *corev1.ConfigMap
		for _, l := range find[*corev1.ConfigMap](ms) {
			if l.msg.Name == v.ConfigMap.Name && l.msg.Namespace == dep.Namespace {
				cm = l.msg
			}
		}
		if cm == nil {
			fail("%s: ConfigMap %s/%s is not among the manifests", where, dep.Namespace, v.ConfigMap.Name)
		} else if data, ok := cm.Data[path.Base(configFile)]; !ok {
			fail("%s: ConfigMap %s has no key %q for -c %s", where, cm.Name, path.Base(configFile), configFile)
		} else if err := checkConfigYAML([]byte(data)); err != nil {
			fail("ConfigMap %s, %s: %w", cm.Name, path.Base(configFile), err)
		}
	}

	// --data: a mounted PersistentVolumeClaim that exists.
	if v, ok := mountOf(flags["--data"]); !ok || v.PersistentVolumeClaim == nil {
		fail("%s: --data %s is not a mounted PersistentVolumeClaim (the ledger must outlive the pod)", where, flags["--data"])
	} else if !hasObject(find[*corev1.PersistentVolumeClaim](ms), dep.Namespace, v.PersistentVolumeClaim.ClaimName) {
		fail("%s: PersistentVolumeClaim %s/%s is not among the manifests", where, dep.Namespace, v.PersistentVolumeClaim.ClaimName)
	}

	// --listen: the container port the Service targets.
	listenPort := flags["--listen"][strings.LastIndex(flags["--listen"], ":")+1:]
	var containerPort *corev1.ContainerPort
	for i, p := range c.Ports {
		if fmt.Sprint(p.ContainerPort) == listenPort {
			containerPort = &c.Ports[i]
		}
	}
	if containerPort == nil {
		fail("%s: --listen %s: no containerPort %s", where, flags["--listen"], listenPort)
	}

	// The admin token from a Secret that exists and has the key.
	var tokenRef *corev1.SecretKeySelector
	for _, e := range c.Env {
		if e.Name == "TT_ADMIN_TOKEN" && e.ValueFrom != nil {
			tokenRef = e.ValueFrom.SecretKeyRef
		}
	}
	if tokenRef == nil {
		fail("%s: TT_ADMIN_TOKEN does not come from a Secret", where)
	} else if !secretHasKey(find[*corev1.Secret](ms), dep.Namespace, tokenRef.Name, tokenRef.Key) {
		fail("%s: TT_ADMIN_TOKEN: Secret %s/%s with key %q is not among the manifests", where, dep.Namespace, tokenRef.Name, tokenRef.Key)
	}

	// The internal token from a Secret that exists and has the key, and the
	// same Secret where the gateway runs.
	var internalRef *corev1.SecretKeySelector
	for _, e := range c.Env {
		if e.Name == "TT_ACCOUNTANT_TOKEN" && e.ValueFrom != nil {
			internalRef = e.ValueFrom.SecretKeyRef
		}
	}
	if internalRef == nil {
		fail("%s: TT_ACCOUNTANT_TOKEN does not come from a Secret: the accountant does not start without its internal token", where)
	} else {
		if !secretHasKey(find[*corev1.Secret](ms), dep.Namespace, internalRef.Name, internalRef.Key) {
			fail("%s: TT_ACCOUNTANT_TOKEN: Secret %s/%s with key %q is not among the manifests", where, dep.Namespace, internalRef.Name, internalRef.Key)
		}
		if gwNS := metaOf(ms, wp.path).Namespace; !secretHasKey(find[*corev1.Secret](ms), gwNS, internalRef.Name, internalRef.Key) {
			fail("%s: Secret %s/%s with key %q is not among the manifests: the gateway needs the accountant's internal token too", wp.path, gwNS, internalRef.Name, internalRef.Key)
		}
	}

	// The Service selects the pod and targets the listen port.
	for k, want := range svc.Spec.Selector {
		if dep.Spec.Template.Labels[k] != want {
			fail("Service %s: selector %s=%s does not select the accountant's pods", svc.Name, k, want)
		}
	}
	if svc.Namespace != dep.Namespace {
		fail("Service %s is in namespace %q, the Deployment in %q", svc.Name, svc.Namespace, dep.Namespace)
	}
	var svcPort *corev1.ServicePort
	for i, p := range svc.Spec.Ports {
		t := p.TargetPort.String()
		if containerPort != nil && (t == containerPort.Name || t == fmt.Sprint(containerPort.ContainerPort)) {
			svcPort = &svc.Spec.Ports[i]
		}
	}
	if svcPort == nil {
		return errors.Join(append(errs, fmt.Errorf("Service %s: no port targets the accountant's --listen port %s", svc.Name, listenPort))...)
	}
	if svcPort.AppProtocol == nil || *svcPort.AppProtocol != "http" {
		fail("Service %s: port %d needs appProtocol: http, or Istio treats it as TCP", svc.Name, svcPort.Port)
	}

	// The WasmPlugin.
	spec := wp.msg
	wpWhere := wp.path + " " + metaOf(ms, wp.path).Name
	if !strings.HasPrefix(spec.GetUrl(), "oci://") || !regexp.MustCompile(`:[\w][\w.-]*$|@sha256:[a-f0-9]{64}$`).MatchString(spec.GetUrl()) {
		fail("%s: url %q: want oci://<registry>/<repo>:<version> (or @sha256:<digest>)", wpWhere, spec.GetUrl())
	}
	if s := spec.GetSha256(); s != "" && !sha256Hex.MatchString(s) {
		fail("%s: sha256 %q: want empty or 64 lowercase hex digits (no sha256: prefix)", wpWhere, s)
	}
	if spec.GetFailStrategy() == extensionsv1alpha1.FailStrategy_FAIL_OPEN {
		fail("%s: failStrategy FAIL_OPEN would let every request through ungoverned when the filter fails; use FAIL_CLOSE or FAIL_RELOAD", wpWhere)
	}
	if spec.GetPhase() == extensionsv1alpha1.PluginPhase_UNSPECIFIED_PHASE {
		fail("%s: phase: set it, so the filter's place relative to Istio's authn, authz and stats filters is chosen, not left to istiod", wpWhere)
	}
	if spec.GetType() != extensionsv1alpha1.PluginType_HTTP {
		fail("%s: type %s, want HTTP", wpWhere, spec.GetType())
	}
	if spec.GetPluginName() == "" {
		fail("%s: pluginName is empty", wpWhere)
	}
	for _, gw := range find[*networkingv1.Gateway](ms) {
		for k, v := range gw.msg.GetSelector() {
			if spec.GetSelector().GetMatchLabels()[k] != v {
				fail("%s: selector does not select the gateway workload %s=%s of %s", wpWhere, k, v, gw.path)
			}
		}
	}
	// Istio hands pluginConfig to the filter as the protojson rendering of
	// its Struct; decode exactly that.
	raw, err := protojson.Marshal(spec.GetPluginConfig())
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("%s: pluginConfig: %w", wpWhere, err))...)
	}
	conf, err := decodePluginConfig(raw)
	if err != nil {
		fail("%s: pluginConfig: the filter would reject its plugin configuration: %w", wpWhere, err)
	} else {
		limit, at, patchErrs := gatewayBufferLimit(ms, spec.GetSelector().GetMatchLabels())
		errs = append(errs, patchErrs...)
		if int64(limit) < conf.MaxBodyBytes {
			fail("%s: the gateway's listener buffer limit is %d (%s), below pluginConfig.max_body_bytes %d: request bodies between the two would get Envoy's bare 413 instead of the filter's; raise it with an EnvoyFilter (buffer-limit.yaml) or lower max_body_bytes",
				wpWhere, limit, at, conf.MaxBodyBytes)
		}
		var hostEnv []string
		set := map[string]string{}
		for _, e := range spec.GetVmConfig().GetEnv() {
			if e.GetValueFrom() == extensionsv1alpha1.EnvValueSource_HOST {
				hostEnv = append(hostEnv, e.GetName())
			} else {
				set[e.GetName()] = e.GetValue()
			}
		}
		if conf.Accountant != nil {
			if err := checkInternalToken(conf.Accountant, hostEnv, set); err != nil {
				fail("%s: pluginConfig: %w", wpWhere, err)
			}
		}
		want := istioClusterName(svc, svcPort.Port)
		if conf.Accountant == nil || conf.Accountant.Cluster != want {
			got := ""
			if conf.Accountant != nil {
				got = conf.Accountant.Cluster
			}
			fail("%s: pluginConfig.accountant.cluster %q, want %q, the cluster Istio builds for Service %s/%s port %d",
				wpWhere, got, want, svc.Namespace, svc.Name, svcPort.Port)
		}
	}
	fqdn := fmt.Sprintf("%s.%s.svc.cluster.local", svc.Name, svc.Namespace)
	for _, dr := range find[*networkingv1.DestinationRule](ms) {
		if dr.msg.GetHost() == fqdn && len(dr.msg.GetSubsets()) > 0 {
			fail("%s: subsets on %s would rename the accountant's cluster to outbound|%d|<subset>|%s", dr.path, fqdn, svcPort.Port, fqdn)
		}
	}

	// Routes to a provider pass on neither accept-encoding nor a client
	// credential.
	_, routeErrs := checkIstioProviderRoutes(find[*networkingv1.VirtualService](ms), serviceHosts(svc))
	errs = append(errs, routeErrs...)
	return errors.Join(errs...)
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
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		files[n] = b
	}
	return files
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
			old: "istio: ingressgateway", new: "istio: egressgateway",
			want: []string{"the gateway's listener buffer limit is 1048576 (Envoy's default, no EnvoyFilter raises it)"},
		},
		{
			name: "misspelt field in the buffer limit patch", file: "buffer-limit.yaml",
			old: "per_connection_buffer_limit_bytes:", new: "per_connection_buffer_limit_byte:",
			want: []string{"configPatches[0]: patch.value is not an Envoy Listener", "per_connection_buffer_limit_byte"},
		},
		{
			name: "misspelt field in a Deployment", file: "accountant.yaml",
			old: "containerPort: 8791", new: "containerport: 8791",
			want: []string{`unknown field "spec.template.spec.containers[0].ports[0].containerport"`},
		},
		{
			name: "misspelt field in a DestinationRule", file: "accountant.yaml",
			old: "idleTimeout: 300s", new: "idle_timeout_s: 300s",
			want: []string{"DestinationRule", `unknown field "idle_timeout_s"`},
		},
		{
			name: "internal token not passed to the VM", file: "wasmplugin.yaml",
			old: "        valueFrom: HOST\n", new: "        value: \"\"\n",
			want: []string{`accountant.token_env "TT_ACCOUNTANT_TOKEN" is not passed to the VM`},
		},
		{
			name: "no internal token for the accountant", file: "accountant.yaml",
			old: "            - name: TT_ACCOUNTANT_TOKEN\n", new: "            - name: TT_OTHER\n",
			want: []string{"TT_ACCOUNTANT_TOKEN does not come from a Secret: the accountant does not start without its internal token"},
		},
		{
			name: "no internal token Secret where the gateway runs", file: "wasmplugin.yaml",
			old: "  namespace: istio-system\ntype: Opaque", new: "  namespace: default\ntype: Opaque",
			want: []string{"Secret istio-system/tokentriage-internal with key \"TT_ACCOUNTANT_TOKEN\" is not among the manifests: the gateway needs the accountant's internal token too"},
		},
		{
			name: "plugin that fails open", file: "wasmplugin.yaml",
			old: "  failStrategy: FAIL_CLOSE\n", new: "  failStrategy: FAIL_OPEN\n",
			want: []string{"failStrategy FAIL_OPEN"},
		},
		{
			name: "sha256 with its prefix", file: "wasmplugin.yaml",
			old: `sha256: ""`, new: `sha256: "sha256:0000000000000000000000000000000000000000000000000000000000000000"`,
			want: []string{"want empty or 64 lowercase hex digits"},
		},
		{
			name: "accountant cluster in the wrong namespace", file: "wasmplugin.yaml",
			old:  `cluster: "outbound|8791||tokentriage-accountant.tokentriage.svc.cluster.local"`,
			new:  `cluster: "outbound|8791||tokentriage-accountant.default.svc.cluster.local"`,
			want: []string{`want "outbound|8791||tokentriage-accountant.tokentriage.svc.cluster.local"`},
		},
		{
			name: "accountant cluster with the target port", file: "wasmplugin.yaml",
			old: `cluster: "outbound|8791||`, new: `cluster: "outbound|http||`,
			want: []string{`pluginConfig.accountant.cluster "outbound|http||`},
		},
		{
			name: "misspelt plugin configuration field", file: "wasmplugin.yaml",
			old: "sync_interval: 1s", new: "sync_intervl: 1s",
			want: []string{"the filter would reject its plugin configuration", "sync_intervl"},
		},
		{
			name: "accountant command with a misspelt flag", file: "accountant.yaml",
			old: "- --listen\n", new: "- --listn\n",
			want: []string{"want the command"},
		},
		{
			name: "data directory not on the volume", file: "accountant.yaml",
			old: "mountPath: /var/lib/tokentriage", new: "mountPath: /data",
			want: []string{"--data /var/lib/tokentriage is not a mounted PersistentVolumeClaim"},
		},
		{
			name: "admin token Secret key that does not exist", file: "accountant.yaml",
			old: "key: admin-token", new: "key: token",
			want: []string{`TT_ADMIN_TOKEN: Secret tokentriage/tokentriage-admin with key "token"`},
		},
		{
			name: "governance config in the ConfigMap that does not decode", file: "accountant.yaml",
			old: "attach: { level: org }", new: "atach: { level: org }",
			want: []string{"ConfigMap tokentriage-config", "atach"},
		},
		{
			name: "subset on the accountant's DestinationRule", file: "accountant.yaml",
			old:  "  trafficPolicy:\n    tls:\n      mode: ISTIO_MUTUAL\n",
			new:  "  subsets:\n    - name: v1\n      labels: { app: tokentriage-accountant }\n  trafficPolicy:\n    tls:\n      mode: ISTIO_MUTUAL\n",
			want: []string{"would rename the accountant's cluster"},
		},
		{
			name: "Service port Istio would treat as TCP", file: "accountant.yaml",
			old: "      appProtocol: http\n", new: "\n",
			want: []string{"needs appProtocol: http"},
		},
		{
			name: "provider route that passes accept-encoding on", file: "providers.yaml",
			old: "remove: [authorization, api-key, x-goog-api-key, cookie, proxy-authorization, accept-encoding]", new: "remove: [authorization, api-key, x-goog-api-key, cookie, proxy-authorization]",
			want: []string{"http[0] (anthropic) route[0] to api.anthropic.com: the client's accept-encoding reaches the provider (neither removed nor overwritten): add it to headers.request.remove"},
		},
		{
			name: "openai route that passes the client's x-api-key on", file: "providers.yaml",
			old: "remove: [x-api-key, api-key, x-goog-api-key, cookie, proxy-authorization, accept-encoding]", new: "remove: [api-key, x-goog-api-key, cookie, proxy-authorization, accept-encoding]",
			want: []string{"http[1] (openai) route[0] to api.openai.com: the client's x-api-key reaches the provider"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := filepath.Join("istio", tc.file)
			src := string(files[name])
			if n := strings.Count(src, tc.old); n != 1 {
				t.Fatalf("%s holds %q %d times; the case needs it exactly once", name, tc.old, n)
			}
			broken := map[string][]byte{}
			for k, v := range files {
				broken[k] = v
			}
			broken[name] = []byte(strings.Replace(src, tc.old, tc.new, 1))
			err := checkIstio(broken)
			if err == nil {
				t.Fatal("the broken manifests were accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}
