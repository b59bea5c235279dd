package config

// Number is a number in the generic tree: its literal exactly as written,
// in JSON's number grammar (YAML literals are normalised to it), so that a
// dollar amount never passes through a float. It plays the part of
// encoding/json's Number without bringing encoding/json into the filter.
type Number string

// String returns the literal.
func (n Number) String() string { return string(n) }
