package main

import (
	"strconv"
	"strings"
	"unsafe"
)

//go:wasmimport wasi_snapshot_preview1 random_get
func wasiRandomGet(buf *byte, n int32) int32

//go:wasmimport wasi_snapshot_preview1 clock_time_get
func wasiClockTimeGet(id int32, precision int64, out *uint64) int32

//go:wasmimport wasi_snapshot_preview1 proc_exit
func wasiProcExit(code int32)

//go:wasmimport wasi_snapshot_preview1 fd_write
func wasiFdWrite(fd int32, iovs unsafe.Pointer, n int32, written *int32) int32

//go:wasmimport wasi_snapshot_preview1 fd_fdstat_get
func wasiFdFdstatGet(fd int32, out *[24]byte) int32

//go:wasmimport wasi_snapshot_preview1 poll_oneoff
func wasiPollOneoff(in, out unsafe.Pointer, n int32, events *int32) int32

// wasiCalls reports what the host's WASI answers, as Envoy's would be.
func wasiCalls() string {
	var out []string
	big := make([]byte, 64<<10+1)
	out = append(out, "random-big="+itoa(wasiRandomGet(&big[0], int32(len(big)))))
	small := make([]byte, 16)
	out = append(out, "random="+itoa(wasiRandomGet(&small[0], 16)))
	var t uint64
	out = append(out, "realtime="+itoa(wasiClockTimeGet(0, 1, &t))+":"+strconv.FormatUint(t, 10))
	out = append(out, "monotonic="+itoa(wasiClockTimeGet(1, 1, &t))+":"+strconv.FormatUint(t, 10))
	out = append(out, "cputime="+itoa(wasiClockTimeGet(2, 1, &t)))
	wasiProcExit(3)
	out = append(out, "after-exit=alive")
	msg := []byte("to stdout\n")
	iov := [2]uint32{uint32(uintptr(unsafe.Pointer(&msg[0]))), uint32(len(msg))}
	var n int32
	out = append(out, "fd1="+itoa(wasiFdWrite(1, unsafe.Pointer(&iov), 1, &n))+":"+itoa(n))
	out = append(out, "fd5="+itoa(wasiFdWrite(5, unsafe.Pointer(&iov), 1, &n)))
	var st [24]byte
	out = append(out, "fdstat0="+itoa(wasiFdFdstatGet(0, &st)))
	out = append(out, "fdstat2="+itoa(wasiFdFdstatGet(2, &st))+":"+strconv.Itoa(int(st[8])))
	var events int32
	var sub [48]byte
	var ev [32]byte
	out = append(out, "poll="+itoa(wasiPollOneoff(unsafe.Pointer(&sub), unsafe.Pointer(&ev), 1, &events)))
	return strings.Join(out, " ")
}
