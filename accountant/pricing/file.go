package pricing

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"

	"go.yaml.in/yaml/v3"

	"github.com/tokentriage/tokentriage/shared/config"
)

// A pricing file (YAML, or JSON, which is read by the same decoder) adds
// models to the built-in catalog or replaces them by name. Rates are dollars
// per million tokens, written as decimals and read exactly:
//
//	models:
//	  gpt-4o-mini:            # replaces the built-in entry
//	    input: 0.15
//	    output: 0.60
//	    cached_input: 0.075
//	  acme-llm:               # a new model
//	    input: 1
//	    output: 2
//	    aliases: [acme-llm-v1]
//
// input and output are required; cached_input defaults to input. Unknown
// keys are errors.

// LoadFile reads a pricing file and returns the built-in catalog extended
// and overridden by it.
func LoadFile(path string) (*Catalog, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pricing: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("pricing: %s: %w", path, err)
	}
	return c, nil
}

// Parse reads a pricing document (see LoadFile) over the built-in catalog.
// Every problem in the document is reported, one per line.
func Parse(doc []byte) (*Catalog, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("unreadable document: %w", err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("the document must be a mapping with a models key")
	}
	var problems []error
	entries := Default().Models()
	top := root.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if k.Value != "models" {
			problems = append(problems, fmt.Errorf("line %d: unknown key %q (the only top-level key is models)", k.Line, k.Value))
			continue
		}
		if v.Kind != yaml.MappingNode {
			problems = append(problems, fmt.Errorf("line %d: models must be a mapping of model name to rates", v.Line))
			continue
		}
		for j := 0; j+1 < len(v.Content); j += 2 {
			m, errs := parseModel(v.Content[j], v.Content[j+1])
			problems = append(problems, errs...)
			if len(errs) == 0 {
				entries = append(entries, m)
			}
		}
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return newCatalog(entries), nil
}

func parseModel(name, body *yaml.Node) (Model, []error) {
	m := Model{Name: name.Value}
	at := func(n *yaml.Node, key string) string {
		return fmt.Sprintf("line %d: models.%s.%s", n.Line, name.Value, key)
	}
	if name.Value == "" {
		return m, []error{fmt.Errorf("line %d: a model name must not be empty", name.Line)}
	}
	if body.Kind != yaml.MappingNode {
		return m, []error{fmt.Errorf("line %d: models.%s must be a mapping with input and output", body.Line, name.Value)}
	}
	var errs []error
	seen := map[string]bool{}
	rate := func(k, v *yaml.Node) int64 {
		if v.Kind != yaml.ScalarNode {
			errs = append(errs, fmt.Errorf("%s: must be a number of dollars per million tokens", at(v, k.Value)))
			return 0
		}
		u, err := config.ParseUSD(v.Value)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at(v, k.Value), err))
			return 0
		}
		if u.Nanos < 0 {
			errs = append(errs, fmt.Errorf("%s: %s is negative; a rate is zero or more", at(v, k.Value), v.Value))
		}
		return u.Nanos
	}
	for i := 0; i+1 < len(body.Content); i += 2 {
		k, v := body.Content[i], body.Content[i+1]
		seen[k.Value] = true
		switch k.Value {
		case "input":
			m.Rates.Input = rate(k, v)
		case "output":
			m.Rates.Output = rate(k, v)
		case "cached_input":
			m.Rates.Cached = rate(k, v)
		case "aliases":
			if err := v.Decode(&m.Aliases); err != nil {
				errs = append(errs, fmt.Errorf("%s: must be a list of model names", at(v, "aliases")))
			}
		default:
			errs = append(errs, fmt.Errorf("%s: unknown key (known: input, output, cached_input, aliases)", at(k, k.Value)))
		}
	}
	var missing []string
	for _, k := range []string{"input", "output"} {
		if !seen[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	for _, k := range missing {
		errs = append(errs, fmt.Errorf("%s: required (dollars per million tokens)", at(body, k)))
	}
	return m, errs
}
