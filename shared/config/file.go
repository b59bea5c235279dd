// Package config owns the governance configuration schema (schema.go) and
// its strict decoding. The YAML an operator writes and the JSON the filter
// receives are first turned into one generic tree (internal/configfile for
// YAML files, ParseJSON for JSON) and then decoded by DecodeStrict over the
// schema's json tags, so both spellings accept exactly the same documents.
// Decoding checks shapes only; what the values mean is checked by
// shared/govern's Compile.
package config

// DecodeFile decodes the tree of a whole configuration file.
func DecodeFile(tree any) (*File, error) {
	var f File
	if err := DecodeStrict(tree, &f, ""); err != nil {
		return nil, err
	}
	return &f, nil
}

// DecodeGovernance decodes the tree of a governance block on its own (the
// block embedded in the plugin configuration or carried by sync).
func DecodeGovernance(tree any) (*Governance, error) {
	var g Governance
	if err := DecodeStrict(tree, &g, "governance"); err != nil {
		return nil, err
	}
	return &g, nil
}

// DecodeJSON parses and strictly decodes a configuration file written as
// JSON. The error is a *SyntaxError or a Problems.
func DecodeJSON(b []byte) (*File, error) {
	tree, err := ParseJSON(b)
	if err != nil {
		return nil, err
	}
	return DecodeFile(tree)
}

// DecodeGovernanceJSON parses and strictly decodes a governance block
// written as JSON; problem paths start at "governance". The error is a
// *SyntaxError or a Problems.
func DecodeGovernanceJSON(b []byte) (*Governance, error) {
	tree, err := ParseJSON(b)
	if err != nil {
		return nil, err
	}
	return DecodeGovernance(tree)
}
