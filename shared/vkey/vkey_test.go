package vkey

import (
	"bytes"
	"crypto/rand"
	"testing"
)

func TestMintKIDVerify(t *testing.T) {
	key, kid, err := Mint(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	got, err := KID(key)
	if err != nil || got != kid {
		t.Fatalf("KID(%q) = %q, %v; want %q", key, got, err, kid)
	}
	if !ValidKID(kid) {
		t.Fatalf("ValidKID(%q) = false", kid)
	}
	h := Hash(key)
	if !Verify(key, h) {
		t.Fatal("Verify(key, Hash(key)) = false")
	}
	if Verify(key+"x", h) || Verify(key, "zz") || Verify(key, h[:10]) {
		t.Fatal("Verify accepted a wrong key or a malformed hash")
	}
}

func TestMintDeterministic(t *testing.T) {
	r := bytes.NewReader(bytes.Repeat([]byte{1, 250, 61, 62}, 40))
	key, kid, err := Mint(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := "tt-vk_1z01z01z01z0-1z01z01z01z01z01z01z01z01z01z01z"; key != want {
		t.Fatalf("key = %q, want %q", key, want)
	}
	if kid != "vk_1z01z01z01z0" {
		t.Fatalf("kid = %q", kid)
	}
}

func TestKIDRejects(t *testing.T) {
	for _, s := range []string{"", "sk-abc", "tt-vk_short-x", "tt-vk_FEKZdMs2UQRi_3kLwQ0vX9bY2cD4eF6gH8iJ0kL2mN4oP",
		"tt-vk_FEKZdMs2UQR!-3kLwQ0vX9bY2cD4eF6gH8iJ0kL2mN4oP", "tt-vk_FEKZdMs2UQRi-3kLwQ0vX9bY2cD4eF6gH8iJ0kL2mN4o/"} {
		if _, err := KID(s); err == nil {
			t.Errorf("KID(%q) accepted a malformed key", s)
		}
	}
}

func FuzzKID(f *testing.F) {
	f.Add("tt-vk_FEKZdMs2UQRi-3kLwQ0vX9bY2cD4eF6gH8iJ0kL2mN4oP")
	f.Fuzz(func(t *testing.T, s string) {
		kid, err := KID(s)
		if err == nil && !ValidKID(kid) {
			t.Fatalf("KID(%q) = %q which is not a valid kid", s, kid)
		}
	})
}

func TestRotateKeepsTheKID(t *testing.T) {
	key, kid, err := Mint(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Rotate(rand.Reader, kid)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := KID(again); err != nil || got != kid || again == key {
		t.Fatalf("Rotate(%s) = %q: kid %q, %v", kid, again, got, err)
	}
	if _, err := Rotate(rand.Reader, "vk_short"); err == nil {
		t.Fatal("Rotate took a malformed kid")
	}
}
