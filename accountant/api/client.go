package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// Client calls the management API of a running accountant.
type Client struct {
	// BaseURL is the accountant's address, e.g. http://127.0.0.1:8791.
	BaseURL string
	// Token is the admin token or a delegated admin token.
	Token string
	// HTTP is the client used; nil means http.DefaultClient.
	HTTP *http.Client
}

// Error is an error answer of the management API.
type Error struct {
	Status  int
	Type    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("accountant answered %d %s: %s", e.Status, e.Type, e.Message)
}

// UnreachableError is returned when the accountant cannot be reached.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the accountant at %s: %v; is it running (tokentriage accountant -c FILE --listen ADDR --data DIR), and is --accountant its address?", e.URL, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// MintKey mints a virtual key owned by owner.
func (c *Client) MintKey(ctx context.Context, owner string, scopes vkey.Scopes) (MintedKey, error) {
	return c.Mint(ctx, MintRequest{Owner: owner, Scopes: scopes})
}

// Mint mints a virtual key as req says: its owner, scopes and own
// overrides of key-level limits.
func (c *Client) Mint(ctx context.Context, req MintRequest) (MintedKey, error) {
	var out MintedKey
	err := c.do(ctx, http.MethodPost, "keys", nil, req, &out)
	if err == nil && (out.Key == "" || out.KID == "" || out.Owner == "") {
		err = c.notAnAnswer(http.MethodPost, "keys", "it names no key, kid or owner")
	}
	return out, err
}

// LimitDefinition is what a client needs of an armed limit's definition.
type LimitDefinition struct {
	LimitID   string `json:"limit_id"`
	LimitType string `json:"limit_type"`
	Level     string `json:"level"`
}

// Limits lists the armed limits (GET governance/limits).
func (c *Client) Limits(ctx context.Context) ([]LimitDefinition, error) {
	var out struct {
		Definitions *[]LimitDefinition `json:"definitions"`
	}
	if err := c.do(ctx, http.MethodGet, "governance/limits", nil, nil, &out); err != nil {
		return nil, err
	}
	if out.Definitions == nil {
		return nil, c.notAnAnswer(http.MethodGet, "governance/limits", "it has no definitions member")
	}
	return *out.Definitions, nil
}

// ListKeys lists the keys owned by owner or below it; every key the token
// may see when owner is empty.
func (c *Client) ListKeys(ctx context.Context, owner string) ([]KeyView, error) {
	q := url.Values{}
	if owner != "" {
		q.Set("owner", owner)
	}
	var out struct {
		Keys *json.RawMessage `json:"keys"`
	}
	err := c.do(ctx, http.MethodGet, "keys", q, nil, &out)
	if err != nil {
		return nil, err
	}
	if out.Keys == nil {
		return nil, c.notAnAnswer(http.MethodGet, "keys", "it has no keys member")
	}
	var keys []KeyView
	if string(*out.Keys) == "null" {
		return nil, nil
	}
	if err := json.Unmarshal(*out.Keys, &keys); err != nil {
		return nil, c.notAnAnswer(http.MethodGet, "keys", err.Error())
	}
	return keys, nil
}

// RevokeKey revokes the key kid.
func (c *Client) RevokeKey(ctx context.Context, kid string) (runtime.Key, error) {
	var out runtime.Key
	route := "keys/" + url.PathEscape(kid) + "/revoke"
	err := c.do(ctx, http.MethodPost, route, nil, nil, &out)
	if err == nil && (out.KID == "" || out.RevokedAt == nil) {
		err = c.notAnAnswer(http.MethodPost, route, "it names no kid or revocation time")
	}
	return out, err
}

// Key reads one key: its details and its state.
func (c *Client) Key(ctx context.Context, kid string) (KeyView, error) {
	var out KeyView
	route := "keys/" + url.PathEscape(kid)
	err := c.do(ctx, http.MethodGet, route, nil, nil, &out)
	if err == nil && out.KID != kid {
		err = c.notAnAnswer(http.MethodGet, route, "it names another kid")
	}
	return out, err
}

// RotateKey gives the key kid a new secret under the same kid; the
// previous one keeps working for req.Grace (the accountant's default when
// empty).
func (c *Client) RotateKey(ctx context.Context, kid string, req RotateRequest) (RotatedKey, error) {
	var out RotatedKey
	route := "keys/" + url.PathEscape(kid) + "/rotate"
	err := c.do(ctx, http.MethodPost, route, nil, req, &out)
	if err == nil && (out.Key == "" || out.KID != kid) {
		err = c.notAnAnswer(http.MethodPost, route, "it names no key or another kid")
	}
	return out, err
}

// do sends one request and decodes a 2xx answer into out, or returns an
// *Error for an error answer and an *UnreachableError when no answer came.
func (c *Client) do(ctx context.Context, method, route string, q url.Values, body, out any) error {
	base := strings.TrimRight(c.BaseURL, "/")
	u, err := url.Parse(base + Prefix + route)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("accountant address %q is not a URL like http://127.0.0.1:8791", c.BaseURL)
	}
	u.RawQuery = q.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encoding the request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return &UnreachableError{URL: base, Err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return &UnreachableError{URL: base, Err: fmt.Errorf("reading the answer: %w", err)}
	}
	if resp.StatusCode/100 != 2 {
		var eb ErrorBody
		if json.Unmarshal(b, &eb) != nil || eb.Error.Type == "" {
			return &Error{Status: resp.StatusCode, Type: "unexpected", Message: fmt.Sprintf("not a management API answer (is %s an accountant?): %.200s", base, b)}
		}
		return &Error{Status: resp.StatusCode, Type: eb.Error.Type, Message: eb.Error.Message}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return c.notAnAnswer(method, route, err.Error())
	}
	return nil
}

// notAnAnswer is a 2xx answer that is not what the management API sends:
// something else listens at BaseURL, or a proxy in between rewrote it.
func (c *Client) notAnAnswer(method, route, why string) error {
	return fmt.Errorf("the answer from %s to %s %s%s is not a management API answer (%s); is --accountant the address of a tokentriage accountant?",
		strings.TrimRight(c.BaseURL, "/"), method, Prefix, route, why)
}

// IsNotFound reports whether err is a 404 from the management API.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// IsUnauthorized reports whether err is a 401 from the management API.
func IsUnauthorized(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusUnauthorized
}
