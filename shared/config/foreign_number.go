//go:build !wasip1

package config

import "encoding/json"

// foreignNumber accepts, in native builds, the json.Number that a tree
// built with encoding/json's UseNumber carries, as the Number it stands
// for. The wasm build of the filter leaves encoding/json out, and nothing
// there builds such a tree.
func foreignNumber(v any) (Number, bool) {
	n, ok := v.(json.Number)
	return Number(n), ok
}
