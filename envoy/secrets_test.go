package envoy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	credinjv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/credential_injector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	genericv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/injected_credentials/generic/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	"github.com/tokentriage/tokentriage/filter"
	"github.com/tokentriage/tokentriage/wasmtest"
)

// sdsDir is where the configs mount the SDS files of envoy/sds/.
const sdsDir = "/etc/tokentriage/sds/"

// injector is a credential injector of an HTTP filter chain: the header it
// sets and the secret it sets it from.
type injector struct {
	path      string
	name      string
	header    string
	secret    string
	overwrite bool
	disabled  bool
}

func newInjector(path string, f *hcmv3.HttpFilter) (injector, bool) {
	var ci credinjv3.CredentialInjector
	if f.GetTypedConfig() == nil || f.GetTypedConfig().UnmarshalTo(&ci) != nil {
		return injector{}, false
	}
	in := injector{path: path, name: f.GetName(), overwrite: ci.GetOverwrite(), disabled: f.GetDisabled(), header: "authorization"}
	var g genericv3.Generic
	if ci.GetCredential().GetTypedConfig().UnmarshalTo(&g) == nil {
		if g.GetHeader() != "" {
			in.header = strings.ToLower(g.GetHeader())
		}
		in.secret = g.GetCredential().GetName()
	}
	return in, true
}

// keyCluster is the cluster a provider key may reach: the secret
// openai_api_key is OpenAI's, so only routes to the cluster openai may
// pass it on.
func (in injector) keyCluster() string { return strings.TrimSuffix(in.secret, "_api_key") }

// sdsConfigs finds the SdsSecretConfig messages directly inside m (not
// inside an Any: loadEnvoyConfig visits those on their own).
func sdsConfigs(path string, m protoreflect.Message) []located[*tlsv3.SdsSecretConfig] {
	var out []located[*tlsv3.SdsSecretConfig]
	if s, ok := m.Interface().(*tlsv3.SdsSecretConfig); ok {
		return append(out, located[*tlsv3.SdsSecretConfig]{path, s})
	}
	if m.Descriptor().FullName() == "google.protobuf.Any" {
		return nil
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsList():
			for i := 0; i < v.List().Len(); i++ {
				out = append(out, sdsConfigs(fmt.Sprintf("%s[%d]", p, i), v.List().Get(i).Message())...)
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
					out = append(out, sdsConfigs(fmt.Sprintf("%s[%v]", p, k.Interface()), mv.Message())...)
					return true
				})
			}
		default:
			out = append(out, sdsConfigs(p, v.Message())...)
		}
		return true
	})
	return out
}

// checkSDSFile checks one secret a config takes from a file: the file is
// one of envoy/sds/, mounted at /etc/tokentriage/sds/; it decodes strictly
// as the DiscoveryResponse Envoy reads and holds the named Secret, whose
// material is in files (never inline) in the directory the config watches,
// so that replacing them reaches Envoy without a restart.
func checkSDSFile(s *tlsv3.SdsSecretConfig) error {
	pcs := s.GetSdsConfig().GetPathConfigSource()
	if pcs == nil {
		return fmt.Errorf("secret %q: sds_config must be a path_config_source (a file of envoy/sds/)", s.GetName())
	}
	if !strings.HasPrefix(pcs.GetPath(), sdsDir) {
		return fmt.Errorf("secret %q: path %q is not under %s, where the SDS files of envoy/sds/ are mounted", s.GetName(), pcs.GetPath(), sdsDir)
	}
	watched := pcs.GetWatchedDirectory().GetPath()
	if watched == "" {
		return fmt.Errorf("secret %q: path_config_source has no watched_directory: a rotated secret would need a restart", s.GetName())
	}
	local := filepath.Join("sds", strings.TrimPrefix(pcs.GetPath(), sdsDir))
	sec, err := loadSDSSecret(local, s.GetName())
	if err != nil {
		return err
	}
	var files []string
	var inline bool
	for _, ds := range []interface {
		GetFilename() string
		GetInlineString() string
		GetInlineBytes() []byte
	}{sec.GetTlsCertificate().GetCertificateChain(), sec.GetTlsCertificate().GetPrivateKey(), sec.GetGenericSecret().GetSecret()} {
		if ds.GetInlineString() != "" || len(ds.GetInlineBytes()) > 0 {
			inline = true
		}
		if f := ds.GetFilename(); f != "" {
			files = append(files, f)
		}
	}
	switch {
	case inline:
		return fmt.Errorf("%s: secret %q is written inline: a secret in a shipped file; name a file in %s instead", local, s.GetName(), watched)
	case len(files) == 0:
		return fmt.Errorf("%s: secret %q holds neither a tls_certificate nor a generic_secret from files", local, s.GetName())
	}
	for _, f := range files {
		if filepath.Dir(f) != filepath.Clean(watched) {
			return fmt.Errorf("%s: secret %q reads %s, outside the watched directory %s: replacing it would not reach Envoy", local, s.GetName(), f, watched)
		}
	}
	return nil
}

// loadSDSFile decodes an SDS file strictly, as Envoy's path_config_source
// reads it: a DiscoveryResponse whose resources are Secrets.
func loadSDSFile(name string) ([]*tlsv3.Secret, error) {
	src, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return decodeSDS(name, src)
}

// decodeSDS decodes the SDS file src (named name in errors).
func decodeSDS(name string, src []byte) ([]*tlsv3.Secret, error) {
	js, err := yaml.YAMLToJSONStrict(src)
	if err != nil {
		return nil, fmt.Errorf("%s: reading YAML: %w", name, err)
	}
	// The file is an envoy.service.discovery.v3.DiscoveryResponse; it is
	// read as one here without linking the gRPC service package: resources
	// (Any) is the one field a secrets file sets.
	var dr struct {
		Resources []json.RawMessage `json:"resources"`
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&dr); err != nil {
		return nil, fmt.Errorf("%s: decoding: %w (a secrets file holds resources: only)", name, err)
	}
	var out []*tlsv3.Secret
	for i, raw := range dr.Resources {
		var r anypb.Any
		if err := protojson.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("%s: resources[%d]: %w", name, i, err)
		}
		var sec tlsv3.Secret
		if err := r.UnmarshalTo(&sec); err != nil {
			return nil, fmt.Errorf("%s: resources[%d] is a %s, not a Secret: %w", name, i, r.GetTypeUrl(), err)
		}
		if err := sec.ValidateAll(); err != nil {
			return nil, fmt.Errorf("%s: resources[%d]: %w", name, i, err)
		}
		out = append(out, &sec)
	}
	return out, nil
}

func loadSDSSecret(file, name string) (*tlsv3.Secret, error) {
	secs, err := loadSDSFile(file)
	if err != nil {
		return nil, err
	}
	return secretNamed(file, secs, name)
}

// sdsSecretFrom decodes an SDS file's content and finds the secret name.
func sdsSecretFrom(src []byte, name string) (*tlsv3.Secret, error) {
	secs, err := decodeSDS("the file", src)
	if err != nil {
		return nil, err
	}
	return secretNamed("the file", secs, name)
}

func secretNamed(file string, secs []*tlsv3.Secret, name string) (*tlsv3.Secret, error) {
	var names []string
	for _, s := range secs {
		if s.GetName() == name {
			return s, nil
		}
		names = append(names, s.GetName())
	}
	return nil, fmt.Errorf("%s: no secret named %q (it holds %v)", file, name, names)
}

// checkStatTags checks that the bootstrap extracts the tags the filter
// spells into its refusal stats, so a limit id is a Prometheus label.
func checkStatTags(b *bootstrapv3.Bootstrap) []error {
	var have []wasmtest.StatTag
	for _, t := range b.GetStatsConfig().GetStatsTags() {
		have = append(have, wasmtest.StatTag{Name: t.GetTagName(), Regex: t.GetRegex()})
	}
	var errs []error
	for _, want := range filter.StatTags {
		if !slices.Contains(have, wasmtest.StatTag{Name: want.Name, Regex: want.Regex}) {
			errs = append(errs, fmt.Errorf("stats_config.stats_tags: no tag %s with regex %q: the filter's refusal stats would keep the limit in their names instead of a label", want.Name, want.Regex))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	name, tags, err := wasmtest.ExtractTags("wasmcustom."+filter.RefusalStat("team_rpm", "rpm"), have)
	if err != nil {
		return []error{fmt.Errorf("stats_config.stats_tags: %w", err)}
	}
	if name != "wasmcustom.tokentriage.refusals" || !slices.Contains(tags, [2]string{"limit_id", "team_rpm"}) || !slices.Contains(tags, [2]string{"limit_type", "rpm"}) {
		return []error{fmt.Errorf("stats_config.stats_tags turn the refusal stat into %s %v, want wasmcustom.tokentriage.refusals with limit_id team_rpm and limit_type rpm", name, tags)}
	}
	return nil
}
