package runtime

import (
	"errors"
	"strings"
)

// validNodeID stands in for govern.ValidNodeID until it lands.
func validNodeID(id string) error {
	if id == "" {
		return errors.New("empty")
	}
	for _, seg := range strings.Split(id, "/") {
		kind, name, ok := strings.Cut(seg, ":")
		if !ok || kind == "" || name == "" {
			return errors.New("bad segment " + seg)
		}
		for _, c := range kind {
			if c < 'a' || c > 'z' {
				return errors.New("bad kind")
			}
		}
		for _, c := range name {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return errors.New("bad id")
			}
		}
	}
	return nil
}
