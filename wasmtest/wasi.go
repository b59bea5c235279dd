package wasmtest

import (
	"fmt"
	"strings"
)

// The WASI calls a Go reactor makes, answered as Envoy answers them
// (shared/proxy-wasm.md 2.1), not as a general-purpose WASI would: stdout and
// stderr are log lines, the clocks are the host's Clock, the environment is
// Config.Env and nothing else, proc_exit does not exit.

func wasiErrno(errno uint64) func(*vm, []uint64) {
	return func(_ *vm, s []uint64) { s[0] = errno }
}

// fd_write(fd, iovs, iovs_len, nwritten): fd 1 is an info log line, fd 2 an
// error log line, a trailing newline stripped; other fds are EBADF.
func wasiFdWrite(v *vm, s []uint64) {
	fd, iovs, n, nwritten := uint32(s[0]), uint32(s[1]), uint32(s[2]), uint32(s[3])
	var level LogLevel
	switch fd {
	case 1:
		level = LogInfo
	case 2:
		level = LogError
	default:
		s[0] = errnoBadf
		return
	}
	var sb strings.Builder
	for i := uint32(0); i < n; i++ {
		iov, ok := v.read(iovs+8*i, 8)
		if !ok {
			s[0] = errnoFault
			return
		}
		p := uint32(iov[0]) | uint32(iov[1])<<8 | uint32(iov[2])<<16 | uint32(iov[3])<<24
		l := uint32(iov[4]) | uint32(iov[5])<<8 | uint32(iov[6])<<16 | uint32(iov[7])<<24
		b, ok := v.read(p, l)
		if !ok {
			s[0] = errnoFault
			return
		}
		sb.Write(b)
	}
	msg := sb.String()
	written := len(msg)
	if written > 0 {
		msg = strings.TrimSuffix(msg, "\n")
		v.h.logs.log(v, level, msg)
	}
	if !v.putU32(nwritten, uint32(written)) {
		s[0] = errnoFault
		return
	}
	s[0] = errnoSuccess
}

// fd_fdstat_get answers for stdout and stderr only: a zeroed fdstat whose
// rights allow fd_write.
func wasiFdFdstatGet(v *vm, s []uint64) {
	fd, out := uint32(s[0]), uint32(s[1])
	if fd != 1 && fd != 2 {
		s[0] = errnoBadf
		return
	}
	if !v.putU64(out, 0) || !v.putU64(out+8, 64) || !v.putU64(out+16, 0) {
		s[0] = errnoFault
		return
	}
	s[0] = errnoSuccess
}

func wasiEnvironSizesGet(v *vm, s []uint64) {
	env := v.h.environ
	size := 0
	for _, e := range env {
		size += len(e) + 1
	}
	if !v.putU32(uint32(s[0]), uint32(len(env))) || !v.putU32(uint32(s[1]), uint32(size)) {
		s[0] = errnoFault
		return
	}
	s[0] = errnoSuccess
}

func wasiEnvironGet(v *vm, s []uint64) {
	arr, buf := uint32(s[0]), uint32(s[1])
	for _, e := range v.h.environ {
		if !v.putU32(arr, buf) {
			s[0] = errnoFault
			return
		}
		b, ok := v.read(buf, uint32(len(e)+1))
		if !ok {
			s[0] = errnoFault
			return
		}
		copy(b, e)
		b[len(e)] = 0
		arr += 4
		buf += uint32(len(e) + 1)
	}
	s[0] = errnoSuccess
}

func wasiArgsSizesGet(v *vm, s []uint64) {
	if !v.putU32(uint32(s[0]), 0) || !v.putU32(uint32(s[1]), 0) {
		s[0] = errnoFault
		return
	}
	s[0] = errnoSuccess
}

// clock_time_get(id, precision, out): realtime (0) and monotonic (1) from the
// host's Clock; any other clock is ENOTSUP.
func wasiClockTimeGet(v *vm, s []uint64) {
	id, out := uint32(s[0]), uint32(s[2])
	var t uint64
	switch id {
	case 0:
		t = uint64(v.h.clock.Now().UnixNano())
	case 1:
		t = uint64(v.h.clock.Monotonic())
	default:
		s[0] = errnoNotsup
		return
	}
	if !v.putU64(out, t) {
		s[0] = errnoFault
		return
	}
	s[0] = errnoSuccess
}

// random_get fills at most 64 KiB (EINVAL above, as Envoy).
func wasiRandomGet(v *vm, s []uint64) {
	p, n := uint32(s[0]), uint32(s[1])
	if n > 64<<10 {
		s[0] = errnoInval
		return
	}
	b, ok := v.read(p, n)
	if !ok {
		s[0] = errnoFault
		return
	}
	if err := v.h.fillRandom(b); err != nil {
		s[0] = errnoFault
		return
	}
	s[0] = errnoSuccess
}

// proc_exit logs and returns; the VM keeps running (Envoy does the same).
func wasiProcExit(v *vm, s []uint64) {
	v.h.logs.log(v, LogError, fmt.Sprintf("wasi proc_exit(%d) called; the host does not exit the VM", uint32(s[0])))
}
