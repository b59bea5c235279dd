package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/internal/devserver"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// DemoKeyFile holds dev's demo key in its data directory, readable by its
// owner only (0600), so the next start on the same --data reuses the key
// (and its spend history) instead of minting another live one.
const DemoKeyFile = "demo.key"

// demoKey returns the demo key for owner: the one of an earlier start on
// this data directory when it is still live and owned by owner, else a new
// one, written to DemoKeyFile. A file others could read is not trusted:
// its key is revoked and a new one minted. reused says which.
func demoKey(ctx context.Context, s *devserver.Server, data, owner string, log *slog.Logger) (k api.MintedKey, reused bool, err error) {
	path := filepath.Join(data, DemoKeyFile)
	key, ok, exposed := readDemoKey(path, log)
	if exposed {
		kid, _ := vkey.KID(key)
		if _, err := s.Admin().RevokeKey(ctx, kid); err != nil && !api.IsNotFound(err) {
			log.Warn("demo key: could not revoke the key of an exposed "+path+"; revoke it with tokentriage keys revoke "+kid, "err", err)
		} else {
			log.Warn("demo key: revoked " + kid + ", whose file others could read")
		}
	}
	if ok {
		kid, _ := vkey.KID(key)
		cur, err := s.Admin().Key(ctx, kid)
		switch {
		case err == nil && cur.State == "live" && cur.Owner == owner:
			if err := s.WaitKey(ctx, key); err == nil {
				return api.MintedKey{Key: key, KID: kid, Owner: cur.Owner, Name: cur.Name}, true, nil
			}
		case err == nil && cur.State == "live":
			log.Info("demo key: the one of an earlier start belongs to another owner; minting one for this owner", "kid", kid, "owner", cur.Owner, "demo_owner", owner)
		case err == nil:
			log.Info("demo key: the one of an earlier start is "+cur.State+"; minting another", "kid", kid)
		case api.IsNotFound(err):
			log.Info("demo key: the one of an earlier start is not in this runtime plane; minting another", "kid", kid)
		default:
			return api.MintedKey{}, false, err
		}
	}
	k, err = s.MintKey(ctx, owner, vkey.Scopes{})
	if err != nil {
		return k, false, err
	}
	if err := writeDemoKey(path, k.Key); err != nil {
		log.Warn("demo key: could not keep it for the next start; the next start mints another", "err", err)
	}
	return k, false, nil
}

// readDemoKey reads the key kept in path: ok when it may be reused;
// exposed when the file could be read by group or others, a key that has
// lain open being a leaked key (the caller revokes it).
func readDemoKey(path string, log *slog.Logger) (key string, ok, exposed bool) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, false
	}
	if err != nil {
		log.Warn("demo key: cannot read "+path+"; minting another", "err", err)
		return "", false, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		log.Warn("demo key: cannot read "+path+"; minting another", "err", err)
		return "", false, false
	}
	key = strings.TrimSpace(string(b))
	if _, err := vkey.KID(key); err != nil {
		log.Warn("demo key: "+path+" does not hold a key; minting another", "file", path)
		return "", false, false
	}
	if st.Mode().Perm()&0o077 != 0 {
		log.Warn("demo key: "+path+" is readable by others ("+st.Mode().Perm().String()+"); its key is revoked and another minted", "file", path)
		return key, false, true
	}
	return key, true, false
}

// writeDemoKey writes key to path, 0600, through a temporary file.
func writeDemoKey(path, key string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := fmt.Fprintln(f, key); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
