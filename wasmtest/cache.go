package wasmtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
)

// CacheOff, as a cache directory, keeps compiled code in memory only.
const CacheOff = "off"

// CacheEnv names the environment variable that chooses the default cache
// directory (DefaultCacheDir).
const CacheEnv = "TT_WASM_CACHE"

// cacheBudget bounds the bytes a cache directory keeps: the least recently
// used modules' code beyond it is removed when another module is added.
// One build of filter.wasm compiles to about 40 MB.
const cacheBudget = 256 << 20

// Cache holds the machine code wazero compiles modules to, so that a module
// is compiled once however many hosts load it: in memory for the life of
// the process, and, when the cache has a directory, on disk for every later
// process too. Compiling filter.wasm takes seconds; loading its compiled
// code takes a tenth of that. See
// RATIONALE.md#why-is-compiled-wasm-cached-in-a-directory.
//
// On disk, each module's code lives in a folder named by the SHA-256 of the
// module's bytes, written by wazero through a temporary file and a rename,
// so processes that compile the same module at once each see either no
// entry or a whole one. An entry that cannot be read (a truncated or
// foreign file, a directory turned read-only) costs one compilation in
// memory, never a failed start, and is rewritten. The cache keeps the
// most recently loaded modules within cacheBudget bytes.
//
// A Cache is safe for concurrent use.
type Cache struct {
	dir  string // "" for memory only
	mu   sync.Mutex
	mem  wazero.CompilationCache            // memory only: every module
	mods map[string]wazero.CompilationCache // on disk: per module folder
}

// DefaultCacheDir is the cache directory a Host uses when Config.Cache is
// nil: $TT_WASM_CACHE when it is set (CacheOff for none), else
// tokentriage/wasm in the user's cache directory (os.UserCacheDir, for
// example ~/.cache/tokentriage/wasm), else none.
func DefaultCacheDir() string {
	if d, ok := os.LookupEnv(CacheEnv); ok && d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return CacheOff
	}
	return filepath.Join(base, "tokentriage", "wasm")
}

// OpenCache returns a cache that keeps compiled code in dir, created with
// mode 0700 if missing; "" or CacheOff keep it in memory only. The
// directory must be the caller's own and writable by no one else: the
// code in it is mapped executable into the process, so a directory
// another user can write to is refused rather than trusted.
func OpenCache(dir string) (*Cache, error) {
	if dir == "" || dir == CacheOff {
		return &Cache{mem: wazero.NewCompilationCache()}, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("wasmtest: cache directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("wasmtest: cache directory: %w", err)
	}
	if err := checkPrivateDir(abs); err != nil {
		return nil, fmt.Errorf("wasmtest: cache directory %s: %w", abs, err)
	}
	return &Cache{dir: abs, mods: map[string]wazero.CompilationCache{}}, nil
}

// CompilationCache is the wazero compilation cache that holds module's
// code, for a runtime of the caller's own (see internal/wasmexec).
func (c *Cache) CompilationCache(module []byte) wazero.CompilationCache {
	cc, _ := c.forModule(module)
	return cc
}

// Dir is the cache's directory, "" when it keeps code in memory only.
func (c *Cache) Dir() string { return c.dir }

var (
	defaultOnce  sync.Once
	defaultCache *Cache
	defaultErr   error
)

// processCache is the cache of hosts whose Config.Cache is nil: one per
// process, over DefaultCacheDir. When that directory cannot be used, the
// process compiles in memory and DefaultCacheError says why.
func processCache() *Cache {
	defaultOnce.Do(func() {
		defaultCache, defaultErr = OpenCache(DefaultCacheDir())
		if defaultErr != nil {
			defaultCache, _ = OpenCache(CacheOff)
		}
	})
	return defaultCache
}

// DefaultCacheError says why hosts with no Config.Cache compile in memory
// only although a cache directory was asked for, nil when they do not.
func DefaultCacheError() error {
	processCache()
	return defaultErr
}

// compile compiles module in rt's cache (runtime's config came from
// runtimeFor). A module whose cached entry cannot be used is compiled
// again, in memory, after its folder is cleared.
func (c *Cache) compile(ctx context.Context, module []byte, newRuntime func(wazero.CompilationCache) wazero.Runtime) (wazero.Runtime, wazero.CompiledModule, error) {
	cc, folder := c.forModule(module)
	rt := newRuntime(cc)
	cm, err := rt.CompileModule(ctx, module)
	if err == nil || folder == "" {
		return rt, cm, err
	}
	// The entry is unreadable, or the directory refused the new one: a
	// compile error of the module itself fails again below.
	rt.Close(ctx)
	c.forget(folder)
	rt = newRuntime(wazero.NewCompilationCache())
	cm, err = rt.CompileModule(ctx, module)
	return rt, cm, err
}

// forModule returns the compilation cache for module and, on disk, its
// folder.
func (c *Cache) forModule(module []byte) (wazero.CompilationCache, string) {
	if c.dir == "" {
		return c.mem, ""
	}
	sum := sha256.Sum256(module)
	name := hex.EncodeToString(sum[:16])
	folder := filepath.Join(c.dir, name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.mods[name]; ok {
		return cc, folder
	}
	now := time.Now()
	_ = os.Chtimes(folder, now, now) // recently used, for pruning
	cc, err := wazero.NewCompilationCacheWithDir(folder)
	if err != nil {
		return wazero.NewCompilationCache(), ""
	}
	c.mods[name] = cc
	c.prune(name)
	return cc, folder
}

// forget drops a module's folder after its entry failed to load or save,
// so that the next process compiles and stores it afresh.
func (c *Cache) forget(folder string) {
	c.mu.Lock()
	delete(c.mods, filepath.Base(folder))
	c.mu.Unlock()
	_ = os.RemoveAll(folder)
}

// prune removes the folders of the least recently used modules once the
// folders hold more than cacheBudget bytes, never keep's. Only folders
// named as forModule names them are touched.
func (c *Cache) prune(keep string) {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	type mod struct {
		name string
		used time.Time
	}
	var mods []mod
	for _, e := range entries {
		if !e.IsDir() || !isModuleFolder(e.Name()) || e.Name() == keep {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		mods = append(mods, mod{e.Name(), info.ModTime()})
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].used.After(mods[j].used) })
	total := folderBytes(filepath.Join(c.dir, keep))
	for _, m := range mods {
		folder := filepath.Join(c.dir, m.name)
		if total += folderBytes(folder); total > cacheBudget {
			_ = os.RemoveAll(folder)
		}
	}
}

// folderBytes is the size of the files under dir.
func folderBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// isModuleFolder reports whether name is 32 lowercase hexadecimal digits.
func isModuleFolder(name string) bool {
	if len(name) != 32 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// checkPrivateDir refuses dir unless it is a directory (not a symbolic
// link) that checkOwner accepts: on unix, owned by this process's user and
// writable by no other.
func checkPrivateDir(dir string) error {
	info, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("not a directory (a symbolic link is not followed)")
	}
	return checkOwner(info)
}

// errSharedDir is what checkPrivateDir reports for a directory others
// could write to.
var errSharedDir = errors.New("writable by other users; use a directory only you can write (mode 0700), or " + CacheEnv + "=" + CacheOff)
