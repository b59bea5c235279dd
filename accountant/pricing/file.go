package pricing

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

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
// input and output are required; cached_input defaults to input (written
// as 0, cached input tokens are free). Unknown
// keys are errors. Names and aliases are compared without case, and every
// name the file gives resolves to exactly one entry: a model named twice, an
// alias that is also a model's name (the file's or a built-in one), and an
// alias two models claim (two in the file, or one in the file and a built-in
// one) are errors naming both entries. A file entry may carry the name of a
// built-in alias: that reprices the alias on its own.

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

// shape says what a pricing document looks like, for the errors of one
// that is empty or of another shape.
const shape = "write models: { NAME: { input: DOLLARS, output: DOLLARS } }, rates in dollars per million tokens"

// Parse reads a pricing document (see LoadFile) over the built-in catalog.
// Every problem in the document is reported, one per line.
func Parse(doc []byte) (*Catalog, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the document is empty; " + shape)
		}
		return nil, fmt.Errorf("unreadable document: %w", err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("the document must be a mapping with a models key; " + shape)
	}
	var problems []error
	entries := Default().Models()
	names := newNameIndex(entries)
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
			if v.Content[j].Value != "" {
				problems = append(problems, names.model(v.Content[j])...)
			}
		}
		for j := 0; j+1 < len(v.Content); j += 2 {
			problems = append(problems, names.aliases(v.Content[j], v.Content[j+1])...)
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
	if !seen["cached_input"] {
		m.Rates.Cached = m.Rates.Input // cached_input defaults to input; 0 written means free
	}
	sort.Strings(missing)
	for _, k := range missing {
		errs = append(errs, fmt.Errorf("%s: required (dollars per million tokens)", at(body, k)))
	}
	return m, errs
}

// nameIndex finds the names of a pricing file that would resolve to more
// than one entry, where the catalog would otherwise keep one of them and
// silently ignore the other.
type nameIndex struct {
	builtinModel map[string]bool   // built-in model names
	builtinAlias map[string]string // built-in alias → its model
	fileModel    map[string]int    // file model name → line
	fileAlias    map[string]string // file alias → the file model claiming it, lower case
	aliasOwner   map[string]string // file alias → that model as the file spells it
	aliasLine    map[string]int    // file alias → line
}

func newNameIndex(builtin []Model) *nameIndex {
	x := &nameIndex{builtinModel: map[string]bool{}, builtinAlias: map[string]string{},
		fileModel: map[string]int{}, fileAlias: map[string]string{}, aliasOwner: map[string]string{}, aliasLine: map[string]int{}}
	for _, m := range builtin {
		x.builtinModel[strings.ToLower(m.Name)] = true
		for _, a := range m.Aliases {
			x.builtinAlias[strings.ToLower(a)] = strings.ToLower(m.Name)
		}
	}
	return x
}

// model records a file model name; a second entry for the same name is a
// problem naming both.
func (x *nameIndex) model(k *yaml.Node) []error {
	n := strings.ToLower(k.Value)
	if first, ok := x.fileModel[n]; ok {
		return []error{fmt.Errorf("line %d: models.%s: model %q is already listed on line %d; "+
			"one of the two would be silently ignored, so keep a single entry with the rates you mean", k.Line, k.Value, k.Value, first)}
	}
	x.fileModel[n] = k.Line
	return nil
}

// aliases checks the aliases of one file model against every model name
// and every other alias. It runs after every model name has been recorded,
// so an alias is checked against file models listed after it too.
func (x *nameIndex) aliases(k, body *yaml.Node) []error {
	if body.Kind != yaml.MappingNode || k.Value == "" {
		return nil
	}
	owner := strings.ToLower(k.Value)
	var list *yaml.Node
	for i := 0; i+1 < len(body.Content); i += 2 {
		if body.Content[i].Value == "aliases" && body.Content[i+1].Kind == yaml.SequenceNode {
			list = body.Content[i+1]
		}
	}
	if list == nil {
		return nil
	}
	var errs []error
	for _, an := range list.Content {
		if an.Kind != yaml.ScalarNode || an.Value == "" {
			continue
		}
		a := strings.ToLower(an.Value)
		at := fmt.Sprintf("line %d: models.%s.aliases: alias %q", an.Line, k.Value, an.Value)
		switch {
		case a == owner:
			continue
		case x.fileModel[a] != 0:
			errs = append(errs, fmt.Errorf("%s is also the name of the model on line %d; "+
				"the model's own entry wins and the alias would be silently ignored, so drop the alias or the entry", at, x.fileModel[a]))
		case x.builtinModel[a]:
			errs = append(errs, fmt.Errorf("%s is the name of a built-in model; "+
				"the built-in entry wins and the alias would be silently ignored, so to reprice %s give it its own entry under models", at, an.Value))
		case x.fileAlias[a] != "" && x.fileAlias[a] != owner:
			errs = append(errs, fmt.Errorf("%s is also an alias of models.%s on line %d; "+
				"an alias names one model, so keep it under one of the two", at, x.aliasOwner[a], x.aliasLine[a]))
		case x.builtinAlias[a] != "" && x.builtinAlias[a] != owner:
			errs = append(errs, fmt.Errorf("%s is a built-in alias of %s; "+
				"to price %s apart from %s give it its own entry under models instead of an alias", at, x.builtinAlias[a], an.Value, x.builtinAlias[a]))
		}
		if x.fileAlias[a] == "" {
			x.fileAlias[a], x.aliasOwner[a], x.aliasLine[a] = owner, k.Value, an.Line
		}
	}
	return errs
}
