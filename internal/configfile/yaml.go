package configfile

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tokentriage/tokentriage/shared/config"
)

// maxValues bounds the values one document may expand to, so aliases
// cannot blow a small file up into a huge tree.
const maxValues = 1 << 20

// ParseYAML parses one YAML document into the generic tree: mappings become
// map[string]any, sequences []any, integers and floats config.Number holding
// the literal (normalised to JSON's number grammar), booleans, strings and
// null as themselves. Aliases are expanded and merge keys (<<) applied. A
// repeated key, a second document or a custom tag is an error with its
// line. An empty document is a nil tree.
func ParseYAML(b []byte) (any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, nil
		}
		return nil, yamlError(b, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err != nil {
			return nil, yamlError(b, err)
		}
		return nil, &config.SyntaxError{Format: "yaml", Line: extra.Line, Msg: "a second document (---); a configuration file holds one"}
	}
	c := converter{}
	return c.node(&doc, "")
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// tabHint is added to a syntax error on a line indented with a tab, which
// YAML's own words ("found character that cannot start any token") do not
// name.
const tabHint = " (a tab: YAML indents with spaces only; replace the tabs at the start of the line with spaces)"

func yamlError(src []byte, err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		e := &config.SyntaxError{Format: "yaml", Line: line, Msg: m[2]}
		if tabIndented(src, line) {
			e.Msg += tabHint
		}
		return e
	}
	return &config.SyntaxError{Format: "yaml", Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// tabIndented reports whether line n (1-based) of src has a tab in its
// leading white space.
func tabIndented(src []byte, n int) bool {
	lines := bytes.Split(src, []byte("\n"))
	if n < 1 || n > len(lines) {
		return false
	}
	l := lines[n-1]
	indent := l[:len(l)-len(bytes.TrimLeft(l, " \t"))]
	return bytes.IndexByte(indent, '\t') >= 0
}

type converter struct {
	values int
	depth  int
}

func (c *converter) errAt(n *yaml.Node, format string, args ...any) error {
	return &config.SyntaxError{Format: "yaml", Line: n.Line, Column: n.Column, Msg: fmt.Sprintf(format, args...)}
}

func (c *converter) node(n *yaml.Node, path string) (any, error) {
	c.values++
	if c.values > maxValues {
		return nil, c.errAt(n, "the document expands to more than %d values (aliases)", maxValues)
	}
	c.depth++
	defer func() { c.depth-- }()
	if c.depth > 1000 {
		return nil, c.errAt(n, "nested more than 1000 levels deep")
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.node(n.Content[0], path)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, c.errAt(n, "unknown alias")
		}
		return c.node(n.Alias, path)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, e := range n.Content {
			v, err := c.node(e, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		return c.mapping(n, path)
	case yaml.ScalarNode:
		return c.scalar(n)
	}
	return nil, c.errAt(n, "unsupported YAML node")
}

func (c *converter) mapping(n *yaml.Node, path string) (any, error) {
	out := make(map[string]any, len(n.Content)/2)
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			return nil, c.errAt(k, "a mapping key must be a plain value, in %s", where(path))
		}
		if _, dup := out[k.Value]; dup {
			return nil, c.errAt(k, "duplicate field %q in %s", k.Value, where(path))
		}
		val, err := c.node(v, config.JoinPath(path, k.Value))
		if err != nil {
			return nil, err
		}
		out[k.Value] = val
	}
	// Merge keys fill in what the mapping does not set itself; with a list
	// of mappings, earlier ones win.
	for _, m := range merges {
		sources := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			sources = m.Content
		}
		for _, s := range sources {
			v, err := c.node(s, path)
			if err != nil {
				return nil, err
			}
			mm, ok := v.(map[string]any)
			if !ok {
				return nil, c.errAt(s, "a merge key (<<) must name a mapping, in %s", where(path))
			}
			for k, e := range mm {
				if _, set := out[k]; !set {
					out[k] = e
				}
			}
		}
	}
	return out, nil
}

func where(path string) string {
	if path == "" {
		return "the top-level mapping"
	}
	return path
}

func (c *converter) scalar(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, c.errAt(n, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return b, nil
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return config.Number(strconv.FormatInt(i, 10)), nil
		}
		var u uint64
		if err := n.Decode(&u); err == nil {
			return config.Number(strconv.FormatUint(u, 10)), nil
		}
		return config.Number(n.Value), nil // out of range; the decoder says so
	case "!!float":
		if lit, ok := jsonNumber(n.Value); ok {
			return config.Number(lit), nil
		}
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, c.errAt(n, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return f, nil // the decoder rejects a non-finite number with its path
		}
		return config.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	case "!!str", "!!timestamp", "!!binary":
		return n.Value, nil
	}
	return nil, c.errAt(n, "unsupported tag %q", n.Tag)
}

var decimalRE = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// jsonNumber rewrites a YAML decimal literal (+1.5, .5, 5., 1_000.5) into
// JSON's number grammar, keeping every digit.
func jsonNumber(s string) (string, bool) {
	s = strings.ReplaceAll(s, "_", "")
	if !decimalRE.MatchString(s) {
		return "", false
	}
	s = strings.TrimPrefix(s, "+")
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp, hasExp := strings.Cut(s, "e")
	if !hasExp {
		mant, exp, hasExp = strings.Cut(s, "E")
	}
	if strings.HasPrefix(mant, ".") {
		mant = "0" + mant
	}
	mant = strings.TrimSuffix(mant, ".")
	// JSON forbids leading zeros in the whole part.
	whole, frac, hasFrac := strings.Cut(mant, ".")
	whole = strings.TrimLeft(whole, "0")
	if whole == "" {
		whole = "0"
	}
	mant = whole
	if hasFrac {
		mant += "." + frac
	}
	if neg {
		mant = "-" + mant
	}
	if hasExp {
		mant += "e" + exp
	}
	return mant, true
}
