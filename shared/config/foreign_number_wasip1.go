package config

// foreignNumber: the wasm build has no encoding/json, so no tree holds its
// Number (see foreign_number.go).
func foreignNumber(any) (Number, bool) { return "", false }
