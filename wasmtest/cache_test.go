//go:build linux

package wasmtest

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
)

// cacheEntries lists the files wazero keeps in a cache directory: the
// compiled code of each module, in its module folder.
func cacheEntries(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// answerModule is (module (func (export "answer") (result i32) i32.const
// 42)): compiling it takes milliseconds, where a Go module takes seconds.
var answerModule = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
	0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f, // type: () -> i32
	0x03, 0x02, 0x01, 0x00, // one function of type 0
	0x07, 0x0a, 0x01, 0x06, 'a', 'n', 's', 'w', 'e', 'r', 0x00, 0x00, // export "answer"
	0x0a, 0x06, 0x01, 0x04, 0x00, 0x41, 0x2a, 0x0b, // i32.const 42
}

// runAnswer compiles answerModule through cache, runs it, and checks that
// the code it got answers 42.
func runAnswer(t *testing.T, cache *Cache) {
	t.Helper()
	ctx := context.Background()
	rt, cm, err := compileModule(ctx, cache, answerModule)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	mod, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := mod.ExportedFunction("answer").Call(ctx); err != nil || len(got) != 1 || got[0] != 42 {
		t.Fatalf("answer() = %v, %v", got, err)
	}
}

// serveOnce starts a host over cache, checks that it answers a request,
// and closes it.
func serveOnce(t *testing.T, cache *Cache, module []byte) {
	t.Helper()
	h, err := New(context.Background(), Config{Module: module, Cache: cache, Clock: NewManualClock(t0), Upstream: Cluster{Handler: http404{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if resp := h.Do(Request{Method: "GET", Path: "/"}); resp.Status != 404 {
		t.Fatalf("status %d, want the upstream's 404", resp.Status)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Sys().(*syscall.Stat_t).Ino
}

// TestCacheDirKeepsCompiledCode: a second process (a second Cache over the
// same directory, with its own wazero engine) loads the code the first one
// stored instead of compiling and storing it again.
func TestCacheDirKeepsCompiledCode(t *testing.T) {
	dir := t.TempDir()
	module := conformance(t)
	first, err := OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	serveOnce(t, first, module)
	files := cacheEntries(t, dir)
	if len(files) != 1 || strings.HasSuffix(files[0], ".tmp") {
		t.Fatalf("cache holds %q, want one compiled module", files)
	}
	was := inode(t, files[0])
	second, err := OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	serveOnce(t, second, module)
	if now := cacheEntries(t, dir); len(now) != 1 || now[0] != files[0] || inode(t, now[0]) != was {
		t.Fatalf("the second process rewrote the cache (%q): it compiled instead of loading", now)
	}
}

// TestCacheSurvivesABadEntry: an entry that cannot be loaded costs one
// compilation, not a failed start, and the next process stores a good one.
func TestCacheSurvivesABadEntry(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	runAnswer(t, c)
	files := cacheEntries(t, dir)
	if len(files) != 1 {
		t.Fatalf("cache holds %q, want one compiled module", files)
	}
	for _, garbage := range [][]byte{[]byte("WAZEVO\x07garbage"), nil} {
		if err := os.WriteFile(files[0], garbage, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := OpenCache(dir)
		if err != nil {
			t.Fatal(err)
		}
		runAnswer(t, c)
		c, err = OpenCache(dir)
		if err != nil {
			t.Fatal(err)
		}
		runAnswer(t, c)
		if now := cacheEntries(t, dir); len(now) != 1 {
			t.Fatalf("after a bad entry %q the cache holds %q, want one good entry again", garbage, now)
		}
		if info, err := os.Stat(files[0]); err != nil || info.Size() < 20 {
			t.Fatalf("the entry was not stored again: %v %v", info, err)
		}
	}
}

// TestCacheConcurrentProcesses: processes that start at once, each
// compiling the same module into the same directory, all start, and leave
// one whole entry behind.
func TestCacheConcurrentProcesses(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := OpenCache(dir)
			if err != nil {
				errs <- err
				return
			}
			ctx := context.Background()
			rt, _, err := compileModule(ctx, c, answerModule)
			if err != nil {
				errs <- err
				return
			}
			rt.Close(ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if files := cacheEntries(t, dir); len(files) != 1 || strings.HasSuffix(files[0], ".tmp") {
		t.Fatalf("cache holds %q, want one compiled module and no temporary file", files)
	}
}

// TestCacheRefusesADirOthersCanWrite: code in the directory is mapped
// executable, so a directory someone else could write to is refused.
func TestCacheRefusesADirOthersCanWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := OpenCache(dir)
	want := "wasmtest: cache directory " + dir + ": writable by other users; use a directory only you can write (mode 0700), or TT_WASM_CACHE=off"
	if err == nil || err.Error() != want {
		t.Fatalf("OpenCache: %v\nwant %s", err, want)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	_, err = OpenCache(link)
	want = "wasmtest: cache directory " + link + ": not a directory (a symbolic link is not followed)"
	if err == nil || err.Error() != want {
		t.Fatalf("OpenCache over a link: %v\nwant %s", err, want)
	}
	if c, err := OpenCache(CacheOff); err != nil || c.Dir() != "" {
		t.Fatalf("OpenCache(off): %v, %v", c, err)
	}
}

// TestCachePrunes: a directory keeps the most recently used modules' code
// within its budget, and leaves alone what it did not write.
func TestCachePrunes(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	names := make([]string, 6)
	for i := range names {
		names[i] = strings.Repeat(string("0123456789abcdef"[i]), 32)
		folder := filepath.Join(dir, names[i])
		if err := os.MkdirAll(filepath.Join(folder, "wazero-v"), 0o700); err != nil {
			t.Fatal(err)
		}
		// A sparse file of a quarter of the budget: code of a large module.
		f, err := os.Create(filepath.Join(folder, "wazero-v", "code"))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(cacheBudget / 4); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := os.Chtimes(folder, old, old.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "notes"), 0o700); err != nil {
		t.Fatal(err)
	}
	c, err := OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	runAnswer(t, c)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	// The module just loaded, the four newest others, and notes.
	if len(left) != 6 {
		t.Fatalf("after pruning: %q, want 5 module folders and notes", left)
	}
	for _, gone := range names[:2] {
		if contains(left, gone) {
			t.Fatalf("the oldest module folder %s was kept: %q", gone, left)
		}
	}
	if !contains(left, "notes") {
		t.Fatalf("a folder the cache did not write was removed: %q", left)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv(CacheEnv, "/somewhere/else")
	if d := DefaultCacheDir(); d != "/somewhere/else" {
		t.Fatalf("with %s set: %q", CacheEnv, d)
	}
	t.Setenv(CacheEnv, "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if d := DefaultCacheDir(); d != "/xdg/tokentriage/wasm" {
		t.Fatalf("with XDG_CACHE_HOME=/xdg: %q", d)
	}
}

type http404 struct{}

func (http404) ServeHTTP(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(404) }
