package runtime

import (
	"errors"
	"fmt"
)

// Kind says why a write was refused, so the management API can answer with
// the right status.
type Kind uint8

const (
	// Invalid: the write breaks a rule (charset, override rules, a missing
	// owner). The API answers 400.
	Invalid Kind = iota + 1
	// NotFound: the write names something that does not exist (a kid, an
	// override, a runtime node, a limit that is not armed). 404.
	NotFound
	// Conflict: the write collides with existing state (a node declared in
	// the config, a node still in use, a key already revoked). 409.
	Conflict
)

// Error is a refused write. Reason is the whole explanation, written for the
// operator: what is wrong and what to do. Error() prefixes the operation.
type Error struct {
	Kind   Kind
	Op     string // "create node", "put override", …
	Reason string
}

func (e *Error) Error() string { return "runtime: " + e.Op + ": " + e.Reason }

func refuse(k Kind, op, format string, args ...any) *Error {
	return &Error{Kind: k, Op: op, Reason: fmt.Sprintf(format, args...)}
}

// asRefusal returns err as an *Error, wrapping any other error as Invalid.
func asRefusal(op string, err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return refuse(Invalid, op, "%v", err)
}
