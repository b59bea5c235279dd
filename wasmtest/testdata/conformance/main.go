// Command conformance is a proxy-wasm guest written against the raw ABI that
// exercises the host: the request header x-mode picks what a stream does,
// and what it observed is written to shared data under "notes:<x-request-id>"
// from proxy_on_delete ("<notes>|<lifecycle>"), or returned in a local reply.
package main

import (
	"encoding/binary"
	"math"
	"os"
	"strconv"
	"strings"
)

func main() {}

const (
	mapReqHeaders  = 0
	mapReqTrailers = 1
	mapRespHeaders = 2
	mapCallHeaders = 6
	bufReqBody     = 0
	bufRespBody    = 1
	bufCallBody    = 4
	bufVMConfig    = 6
	bufPluginCfg   = 7
	maxInt32       = 1<<31 - 1
)

type httpCtx struct {
	id        int32
	mode      string
	reqID     string
	notes     []string
	life      []string
	bodySizes []string
	wantSizes bool
}

func (c *httpCtx) note(s string) { c.notes = append(c.notes, s) }

var (
	ctxs      = map[int32]*httpCtx{}
	calls     = map[int32]int32{}
	rootID    int32
	plugin    string
	tickID    int32
	allocs    int
	allocMode string // "zero": answer the next allocation with 0; "restricted": call the host from it
)

func init() {
	switch os.Getenv("INIT_CALL") {
	case "property":
		getProperty("plugin_name")
	case "metric":
		defineMetric(0, "in_init")
	case "log":
		logf(2, "hello from init")
	}
}

//go:wasmexport proxy_abi_version_0_2_1
func abiVersion() {}

//go:wasmexport proxy_on_memory_allocate
func onMemoryAllocate(size int32) *byte {
	if size <= 0 {
		panic("the host asked for " + strconv.Itoa(int(size)) + " bytes")
	}
	switch allocMode {
	case "zero":
		allocMode = ""
		return nil
	case "restricted":
		allocMode = ""
		getProperty("plugin_name")
	}
	allocs++
	b := make([]byte, size)
	return &b[0]
}

//go:wasmexport proxy_on_context_create
func onContextCreate(id, parent int32) {
	if parent == 0 {
		rootID = id
		return
	}
	ctxs[id] = &httpCtx{id: id}
}

//go:wasmexport proxy_on_vm_start
func onVMStart(root, size int32) bool {
	cfg, _ := getBuffer(bufVMConfig, 0, size)
	return string(cfg) != "refuse-start"
}

//go:wasmexport proxy_on_configure
func onConfigure(root, size int32) bool {
	cfg, st := getBuffer(bufPluginCfg, 0, size)
	plugin = string(cfg)
	if st != 0 || len(cfg) != int(size) {
		logf(4, "plugin configuration unreadable")
		return false
	}
	if strings.Contains(plugin, "reject") {
		logf(4, "configuration rejected: reject is set")
		return false
	}
	if strings.Contains(plugin, "tick") {
		tickID, _ = defineMetric(0, "ticks_total")
		proxySetTickPeriod(1000)
	}
	if strings.Contains(plugin, "configure-shared") {
		casIncrement("configured")
	}
	return true
}

//go:wasmexport proxy_on_tick
func onTick(root int32) {
	casIncrement("ticks")
	proxyIncrementMetric(tickID, 1)
	if strings.Contains(plugin, "tick-call") {
		id, _ := httpCall("auth", [][2]string{{":method", "GET"}, {":path", "/tick"}, {":authority", "auth"}}, "", 0)
		calls[id] = 0
	}
}

// casIncrement adds one to a decimal counter in shared data, retrying on
// CAS_MISMATCH; it returns the new value and the retries it took. A missing
// key is created with a CAS no key can have: with CAS 0 the set would be
// unconditional and a racing creator's value would be overwritten.
func casIncrement(key string) (int, int) {
	retries := 0
	for {
		v, cas, st := getShared(key)
		n := 0
		if st == 0 {
			n, _ = strconv.Atoi(string(v))
		} else {
			cas = -1
		}
		n++
		switch setShared(key, []byte(strconv.Itoa(n)), cas) {
		case 0:
			return n, retries
		case 8:
			retries++
		default:
			return -1, retries
		}
	}
}

//go:wasmexport proxy_on_request_headers
func onRequestHeaders(id, n int32, eos bool) int32 {
	c := ctxs[id]
	c.mode, _ = getHeader(mapReqHeaders, "x-mode")
	c.reqID, _ = getHeader(mapReqHeaders, "x-request-id")
	_, wst := getHeader(mapReqHeaders, "x-want-body-sizes")
	c.wantSizes = wst == 0
	c.note("headers:n=" + strconv.Itoa(int(n)) + ",eos=" + strconv.FormatBool(eos))
	switch c.mode {
	case "pause-body", "stream-body", "hold-body", "hold-local":
		// These change the body: its length goes, as in Envoy a filter must
		// drop it (the headers leave before the body is changed), unless
		// the test wants to see what a stale length does.
		if _, st := getHeader(mapReqHeaders, "x-keep-length"); st != 0 {
			removeHeader(mapReqHeaders, "content-length")
		}
	}
	switch c.mode {
	case "hold-body", "hold-local":
		// Hold the headers until the body has been seen (StopIteration
		// where the host allows it).
		return 1
	case "spin":
		// Hold the VM with work: x-spin is a count of loop rounds, so a
		// test sees a slow call without a clock in the guest.
		v, _ := getHeader(mapReqHeaders, "x-spin")
		rounds, _ := strconv.Atoi(v)
		spinSink = spin(rounds)
	case "headers":
		c.note("add=" + itoa(addHeader(mapReqHeaders, "x-added", "1")))
		c.note("replace=" + itoa(replaceHeader(mapReqHeaders, "x-replace", "new")))
		c.note("remove=" + itoa(removeHeader(mapReqHeaders, "x-remove")))
		_, st := getHeader(mapReqHeaders, "x-missing")
		c.note("missing=" + itoa(st))
		v, _ := getHeader(mapReqHeaders, "X-Multi")
		c.note("multi=" + v)
		var size int32
		c.note("size=" + itoa(proxyGetHeaderMapSize(mapReqHeaders, &size)))
		_, st = getHeader(mapCallHeaders, ":status")
		c.note("call-map=" + itoa(st))
	case "pairs":
		ps, _ := getPairs(mapReqHeaders)
		var keep [][2]string
		for _, p := range ps {
			if p[0] != "x-drop" {
				keep = append(keep, p)
			}
		}
		keep = append(keep, [2]string{"x-pairs", strconv.Itoa(len(ps))})
		c.note("set=" + itoa(proxySetHeaderMapPairs(mapReqHeaders, bptr(encodePairs(keep)), int32(len(encodePairs(keep))))))
	case "pairs-refused":
		// Maps the host cannot hold are refused, never set as empty.
		bad := encodePairs([][2]string{{"x-a", "1"}})
		bad[0] = 9 // a count the data does not hold
		c.note("malformed=" + itoa(proxySetHeaderMapPairs(mapReqHeaders, bptr(bad), int32(len(bad)))))
		ps, _ := getPairs(mapReqHeaders)
		for len(ps) <= 1024 {
			ps = append(ps, [2]string{"x-filler", "1"})
		}
		many := encodePairs(ps)
		c.note("many=" + itoa(proxySetHeaderMapPairs(mapReqHeaders, bptr(many), int32(len(many)))))
		n, first := 0, int32(0)
		for ; n < 1100; n++ {
			if st := addHeader(mapReqHeaders, "x-added", "1"); st != 0 {
				first = st
				break
			}
		}
		c.note("adds=" + strconv.Itoa(n) + "/" + itoa(first))
		big := make([]byte, 1<<20)
		c.note("big=" + itoa(replaceHeader(mapReqHeaders, "x-big", string(big))))
		c.note("local-bad=" + itoa(proxySendLocalResponse(200, nil, 0, nil, 0, bptr(bad), int32(len(bad)), -1)))
		removeHeader(mapReqHeaders, "x-added")
	case "local":
		st := sendLocal(403, "denied by test", "no entry", [][2]string{{"x-local", "1"}})
		c.note("local=" + itoa(st))
		c.note("again=" + itoa(sendLocal(500, "x", "", nil)))
		return 0 // Continue: the host must stop anyway
	case "local-empty":
		sendLocal(204, "nothing", "", nil)
		return 1
	case "pause-headers", "callout":
		timeout := int32(0)
		if t, st := getHeader(mapReqHeaders, "x-timeout"); st == 0 {
			n, _ := strconv.Atoi(t)
			timeout = int32(n)
		}
		cluster := "auth"
		if cl, st := getHeader(mapReqHeaders, "x-cluster"); st == 0 {
			cluster = cl
		}
		tok, _ := getHeader(mapReqHeaders, "x-token")
		authority := "auth.local"
		if _, st := getHeader(mapReqHeaders, "x-empty-authority"); st == 0 {
			authority = "" // as the upstream multiple_dispatches example sends it
		}
		cid, st := httpCall(cluster, [][2]string{{":method", "POST"}, {":path", "/check?x=1"}, {":authority", authority}, {"x-token", tok}}, "body-"+tok, timeout)
		c.note("call=" + itoa(st) + ",id=" + itoa(cid))
		if st != 0 {
			return 0
		}
		calls[cid] = id
		return 1
	case "callout-bad":
		_, st1 := httpCall("nope", [][2]string{{":method", "GET"}, {":path", "/"}, {":authority", "a"}}, "", 0)
		_, st2 := httpCall("auth", [][2]string{{":method", "GET"}, {":path", "/"}}, "", 0)
		_, st3 := httpCall("auth", [][2]string{{":method", "GET"}, {":path", "/"}, {":authority", "a"}}, "", -1)
		_, st4 := httpCall("auth", [][2]string{{":path", "/"}, {":authority", "a"}}, "", 0)
		_, st5 := httpCall("auth", [][2]string{{":method", "GET"}, {":authority", "a"}}, "", 0)
		// Present but empty is present: Envoy checks only that they exist.
		_, st6 := httpCall("sink", [][2]string{{":method", "GET"}, {":path", "/"}, {":authority", ""}}, "", 0)
		sendLocal(200, "", "unknown="+itoa(st1)+" noauthority="+itoa(st2)+" negative="+itoa(st3)+" nomethod="+itoa(st4)+" nopath="+itoa(st5)+" emptyauthority="+itoa(st6), nil)
		return 1
	case "shared":
		v, retries := casIncrement("counter")
		sendLocal(200, "", strconv.Itoa(v)+" "+strconv.Itoa(retries), nil)
		return 1
	case "cas-rules":
		sendLocal(200, "", casRules(), nil)
		return 1
	case "metrics":
		sendLocal(200, "", metrics(), nil)
		return 1
	case "properties":
		sendLocal(200, "", properties(), nil)
		return 1
	case "property":
		path, _ := getHeader(mapReqHeaders, "x-path")
		v, st := getProperty(strings.Split(path, ",")...)
		sendLocal(200, "", itoa(st)+":"+string(v), nil)
		return 1
	case "foreign":
		sendLocal(200, "", foreign(), nil)
		return 1
	case "route":
		// What the route says before and after the filter changes the
		// header the routes match on, with or without clearing the cache.
		c.note("before=" + routeInfo())
		if m, st := getHeader(mapReqHeaders, "x-set-model"); st == 0 {
			replaceHeader(mapReqHeaders, "x-model", m)
		}
		if _, st := getHeader(mapReqHeaders, "x-clear"); st == 0 {
			_, st := callForeign("clear_route_cache", nil)
			c.note("clear=" + itoa(st))
		}
		c.note("after=" + routeInfo())
	case "alloc-empty":
		v, st := getHeader(mapReqHeaders, "x-empty")
		c.note("empty=" + itoa(st) + ":" + v)
		b, st := getBuffer(bufReqBody, 0, maxInt32)
		c.note("nobody=" + itoa(st) + ":" + strconv.Itoa(len(b)))
		p, st := getProperty("plugin_root_id")
		c.note("root=" + itoa(st) + ":" + string(p))
		_, st = getBuffer(bufPluginCfg, 0, maxInt32)
		c.note("plugin-config=" + itoa(st))
		ps, st := getPairs(mapRespHeaders)
		c.note("resp-pairs=" + itoa(st) + ":" + strconv.Itoa(len(ps)))
	case "trap":
		panic("boom in request headers")
	case "close":
		c.note("close=" + itoa(proxyCloseStream(0)))
		return 1
	case "log-level":
		var level int32
		st := proxyGetLogLevel(&level)
		sendLocal(200, "", "level="+itoa(level)+" st="+itoa(st), nil)
		return 1
	case "set-property":
		c.note("set=" + itoa(setProperty("my.key", "my-value")))
		v, st := getProperty("my.key")
		c.note("get=" + itoa(st) + ":" + string(v))
	case "continue-both":
		proxyContinueStream(0)
		return 1
	case "wasi":
		sendLocal(200, "", wasiCalls(), nil)
		return 1
	case "alloc-zero":
		allocMode = "zero"
		_, st := getHeader(mapReqHeaders, "x-mode")
		sendLocal(200, "", "st="+itoa(st), nil)
		return 1
	case "alloc-restricted":
		allocMode = "restricted"
		getHeader(mapReqHeaders, "x-mode")
		return 0
	case "allocs":
		sendLocal(200, "", strconv.Itoa(allocs), nil)
		return 1
	}
	return 0
}

//go:wasmexport proxy_on_request_body
func onRequestBody(id, size int32, eos bool) int32 {
	c := ctxs[id]
	c.bodySizes = append(c.bodySizes, strconv.Itoa(int(size))+eosMark(eos))
	if c.mode == "note-body" {
		// Written at once (notes wait for proxy_on_delete), for tests that
		// wait on the stream while it lives.
		c.note("body:" + strconv.Itoa(int(size)) + eosMark(eos))
		setShared("live:"+c.reqID, []byte(strings.Join(c.notes, ";")), 0)
	}
	switch c.mode {
	case "headers":
		_, st := getHeader(mapReqHeaders, "x-mode")
		c.note("req-hdr-in-body=" + itoa(st))
	case "pause-body":
		if !eos {
			return 1
		}
		body, st := getBuffer(bufReqBody, 0, maxInt32)
		c.note("whole=" + itoa(st) + ":" + strconv.Itoa(len(body)))
		c.note("replace=" + itoa(setBuffer(bufReqBody, 0, maxInt32, []byte(strings.ToUpper(string(body))+"!"))))
	case "stream-body":
		if len(c.bodySizes) == 1 {
			c.note("prepend=" + itoa(setBuffer(bufReqBody, 0, 0, []byte("["))))
			if size > 1 {
				c.note("middle=" + itoa(setBuffer(bufReqBody, 1, 1, []byte("x"))))
			}
		}
		if eos {
			c.note("append=" + itoa(setBuffer(bufReqBody, maxInt32, 0, []byte("]"))))
		}
	case "local-body":
		if !eos {
			return 1
		}
		sendLocal(413, "too big by test", "big", nil)
		return 0
	case "hold-body", "hold-local":
		if !eos {
			return 1
		}
		body, _ := getBuffer(bufReqBody, 0, maxInt32)
		if c.mode == "hold-local" {
			sendLocal(429, "refused by test", "refused after the body", nil)
			return 1
		}
		// The headers are still ours: decide them from the body.
		nb := strings.ToUpper(string(body))
		c.note("hdr-in-body=" + itoa(replaceHeader(mapReqHeaders, "x-from-body", nb)))
		c.note("length=" + itoa(replaceHeader(mapReqHeaders, "content-length", strconv.Itoa(len(nb)))))
		setBuffer(bufReqBody, 0, maxInt32, []byte(nb))
	case "trap-body":
		panic("boom in request body")
	case "late-edit":
		if len(c.bodySizes) == 2 {
			setBuffer(bufReqBody, maxInt32, 0, []byte("x"))
		}
	case "add-trailers":
		if eos {
			c.note("trailer=" + itoa(addHeader(mapReqTrailers, "x-added-trailer", "t")))
		}
	}
	return 0
}

//go:wasmexport proxy_on_request_trailers
func onRequestTrailers(id, n int32) int32 {
	c := ctxs[id]
	v, _ := getHeader(mapReqTrailers, "x-trailer")
	c.note("req-trailers=" + strconv.Itoa(int(n)) + ":" + v)
	c.note("trailer-add=" + itoa(addHeader(mapReqTrailers, "x-filter-trailer", "yes")))
	return 0
}

//go:wasmexport proxy_on_response_headers
func onResponseHeaders(id, n int32, eos bool) int32 {
	c := ctxs[id]
	status, _ := getHeader(mapRespHeaders, ":status")
	c.note("resp-headers:" + status + ",eos=" + strconv.FormatBool(eos))
	_, st := getHeader(mapReqHeaders, "x-mode")
	ps, pst := getPairs(mapReqHeaders)
	c.note("req-hdr-in-resp=" + itoa(st) + "/" + itoa(pst) + ":" + strconv.Itoa(len(ps)))
	switch c.mode {
	case "headers":
		addHeader(mapRespHeaders, "x-resp-added", "1")
		removeHeader(mapRespHeaders, "x-upstream-remove")
		replaceHeader(mapRespHeaders, "x-upstream-replace", "filtered")
		addHeader(mapRespHeaders, "x-body-sizes", strings.Join(c.bodySizes, ","))
	case "local", "local-body", "local-empty":
		addHeader(mapRespHeaders, "x-resp-seen", "1")
	case "resp-local":
		c.note("resp-local=" + itoa(sendLocal(502, "replaced by test", "replaced", nil)))
	case "resp-pause-headers":
		return 1
	case "resp-buffer", "resp-stream":
		if cl, st := getHeader(mapRespHeaders, "content-length"); st == 0 {
			c.note("upstream-cl=" + cl)
		}
	}
	if c.wantSizes {
		addHeader(mapRespHeaders, "x-body-sizes", strings.Join(c.bodySizes, ","))
	}
	return 0
}

//go:wasmexport proxy_on_response_body
func onResponseBody(id, size int32, eos bool) int32 {
	c := ctxs[id]
	c.note("resp-body:" + strconv.Itoa(int(size)) + eosMark(eos))
	switch c.mode {
	case "local":
		body, _ := getBuffer(bufRespBody, 0, maxInt32)
		setBuffer(bufRespBody, 0, maxInt32, []byte(strings.ToUpper(string(body))))
	case "resp-buffer":
		if !eos {
			return 1
		}
		body, _ := getBuffer(bufRespBody, 0, maxInt32)
		setBuffer(bufRespBody, 0, maxInt32, []byte("<"+string(body)+">"))
	case "resp-stream":
		setBuffer(bufRespBody, 0, 0, []byte("|"))
	case "resp-trap":
		panic("boom in response body")
	}
	return 0
}

//go:wasmexport proxy_on_response_trailers
func onResponseTrailers(id, n int32) int32 {
	c := ctxs[id]
	c.note("resp-trailers=" + strconv.Itoa(int(n)))
	addHeader(3, "x-filter-resp-trailer", "yes")
	return 0
}

//go:wasmexport proxy_on_http_call_response
func onHTTPCallResponse(root, cid, nh, bodySize, nt int32) {
	ctxID, ok := calls[cid]
	delete(calls, cid)
	if !ok {
		return
	}
	if ctxID == 0 {
		casIncrement("tick-calls")
		return
	}
	code, msg := getStatus()
	status, _ := getHeader(mapCallHeaders, ":status")
	body, _ := getBuffer(bufCallBody, 0, bodySize)
	eff := proxySetEffectiveContext(ctxID)
	c := ctxs[ctxID]
	if c == nil {
		return
	}
	c.note("effective=" + itoa(eff))
	c.note("callback:root=" + strconv.FormatBool(root == rootID) + ",id=" + itoa(cid) + ",n=" + itoa(nh))
	var auth string
	if nh == 0 {
		auth = "failed-" + itoa(code) + "-" + msg
	} else {
		auth = status + ":" + string(body)
	}
	c.note("add=" + itoa(addHeader(mapReqHeaders, "x-auth", auth)))
	if string(body) == "deny" {
		sendLocal(401, "auth denied", "denied", nil)
		return
	}
	proxyContinueStream(0)
}

//go:wasmexport proxy_on_log
func onLog(id int32) {
	c := ctxs[id]
	c.life = append(c.life, "log")
	if code, st := getProperty("response", "code"); st == 0 && len(code) == 8 {
		c.note("log-code=" + strconv.FormatUint(binary.LittleEndian.Uint64(code), 10))
	}
	if d, st := getProperty("response", "code_details"); st == 0 {
		c.note("log-details=" + string(d))
	}
	_, st := getHeader(mapReqHeaders, "x-mode")
	c.note("log-req-hdr=" + itoa(st))
	c.note("log-add=" + itoa(addHeader(mapRespHeaders, "x-late", "1")))
}

//go:wasmexport proxy_on_done
func onDone(id int32) bool {
	if c := ctxs[id]; c != nil {
		c.life = append(c.life, "done")
	}
	return true
}

//go:wasmexport proxy_on_delete
func onDelete(id int32) {
	c := ctxs[id]
	if c == nil {
		return
	}
	c.life = append(c.life, "delete")
	if c.reqID != "" {
		setShared("notes:"+c.reqID, []byte(strings.Join(c.notes, ";")+"|"+strings.Join(c.life, ",")), 0)
	}
	delete(ctxs, id)
}

func casRules() string {
	var out []string
	_, _, st := getShared("rules:absent")
	out = append(out, "get-absent="+itoa(st))
	out = append(out, "set-new-any-cas="+itoa(setShared("rules:a", []byte("1"), 12345)))
	_, cas, _ := getShared("rules:a")
	out = append(out, "set-stale="+itoa(setShared("rules:a", []byte("2"), cas+1)))
	out = append(out, "set-current="+itoa(setShared("rules:a", []byte("3"), cas)))
	_, cas2, _ := getShared("rules:a")
	out = append(out, "cas-grew="+strconv.FormatBool(cas2 > cas))
	out = append(out, "set-old="+itoa(setShared("rules:a", []byte("4"), cas)))
	out = append(out, "set-zero="+itoa(setShared("rules:a", []byte("5"), 0)))
	v, _, _ := getShared("rules:a")
	out = append(out, "value="+string(v))
	out = append(out, "set-empty="+itoa(setShared("rules:empty", nil, 0)))
	e, _, st := getShared("rules:empty")
	out = append(out, "get-empty="+itoa(st)+":"+strconv.Itoa(len(e)))
	return strings.Join(out, " ")
}

func metrics() string {
	var out []string
	c, st := defineMetric(0, "test_counter")
	out = append(out, "counter="+itoa(c)+"/"+itoa(st))
	g, _ := defineMetric(1, "test_gauge")
	h, _ := defineMetric(2, "test_hist")
	c2, _ := defineMetric(0, "test_counter2")
	out = append(out, "gauge="+itoa(g), "hist="+itoa(h), "counter2="+itoa(c2))
	_, st = defineMetric(3, "bad")
	out = append(out, "define-bad-type="+itoa(st))
	out = append(out, "inc-zero="+itoa(proxyIncrementMetric(c, 0)))
	out = append(out, "inc-neg="+itoa(proxyIncrementMetric(c, -1)))
	out = append(out, "inc="+itoa(proxyIncrementMetric(c, 5)))
	out = append(out, "record-counter="+itoa(proxyRecordMetric(c, 2)))
	out = append(out, "gauge-inc="+itoa(proxyIncrementMetric(g, 10)))
	out = append(out, "gauge-dec="+itoa(proxyIncrementMetric(g, -3)))
	gv, _ := getMetric(g)
	out = append(out, "gauge-value="+strconv.FormatUint(gv, 10))
	out = append(out, "gauge-record="+itoa(proxyRecordMetric(g, 42)))
	out = append(out, "hist-inc="+itoa(proxyIncrementMetric(h, 1)))
	out = append(out, "hist-record="+itoa(proxyRecordMetric(h, 7)))
	_, st = getMetric(h)
	out = append(out, "hist-get="+itoa(st))
	_, st = getMetric(1000)
	out = append(out, "get-unknown="+itoa(st))
	out = append(out, "inc-unknown="+itoa(proxyIncrementMetric(1000, 1)))
	return strings.Join(out, " ")
}

func properties() string {
	var out []string
	str := func(name string, path ...string) {
		v, st := getProperty(path...)
		if st != 0 {
			out = append(out, name+"=!"+itoa(st))
			return
		}
		out = append(out, name+"="+string(v))
	}
	num := func(name string, path ...string) {
		v, st := getProperty(path...)
		if st != 0 || len(v) != 8 {
			out = append(out, name+"=!"+itoa(st)+"/"+strconv.Itoa(len(v)))
			return
		}
		out = append(out, name+"="+strconv.FormatUint(binary.LittleEndian.Uint64(v), 10))
	}
	str("id", "request", "id")
	str("path", "request", "path")
	str("url_path", "request", "url_path")
	str("query", "request", "query")
	str("method", "request", "method")
	str("host", "request", "host")
	str("scheme", "request", "scheme")
	str("protocol", "request", "protocol")
	str("useragent", "request", "useragent")
	str("header", "request", "headers", "x-foo")
	num("time", "request", "time")
	str("plugin_name", "plugin_name")
	str("plugin_root_id", "plugin_root_id")
	str("plugin_vm_id", "plugin_vm_id")
	str("cluster", "xds", "cluster_name")
	str("route", "xds", "route_name")
	str("node_id", "xds", "node", "id")
	str("legacy_node_id", "node", "id")
	str("response_code", "response", "code")
	str("unknown", "no", "such")
	num("source_port", "source", "port")
	return strings.Join(out, " ")
}

func eosMark(eos bool) string {
	if eos {
		return "e"
	}
	return ""
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// routeInfo is the route's name and a few of its metadata, as a filter
// reads them from xds.route_metadata.filter_metadata['envoy.filters.http.wasm'].
func routeInfo() string {
	meta := []string{"xds", "route_metadata", "filter_metadata", "envoy.filters.http.wasm"}
	str := func(path ...string) string {
		v, st := getProperty(path...)
		if st != 0 {
			return "!" + itoa(st)
		}
		return string(v)
	}
	name := str("xds", "route_name")
	backend := str(append(meta, "backend")...)
	var weight string
	if v, st := getProperty(append(meta, "weight")...); st == 0 && len(v) == 8 {
		weight = strconv.FormatFloat(math.Float64frombits(binary.LittleEndian.Uint64(v)), 'g', -1, 64)
	} else {
		weight = "!" + itoa(st) + "/" + strconv.Itoa(len(v))
	}
	var flag string
	if v, st := getProperty(append(meta, "on")...); st == 0 && len(v) == 1 {
		flag = strconv.Itoa(int(v[0]))
	} else {
		flag = "!" + itoa(st)
	}
	tags := str(append(meta, "tags", "1")...)
	var whole string
	if v, st := getProperty(meta...); st == 0 {
		var ks []string
		for _, p := range decodePairs(v) {
			ks = append(ks, p[0])
		}
		whole = strings.Join(ks, "+")
	} else {
		whole = "!" + itoa(st)
	}
	_, nullSt := getProperty(append(meta, "nothing")...)
	legacy := str("route_name")
	return name + "/" + backend + "/" + weight + "/" + flag + "/" + tags + "/" + whole + "/null" + itoa(nullSt) + "/legacy=" + legacy
}

func foreign() string {
	var out []string
	in := []byte(strings.Repeat("tokentriage ", 20))
	z, st := callForeign("compress", in)
	out = append(out, "compress="+itoa(st)+":"+strconv.FormatBool(len(z) > 0 && len(z) < len(in)))
	back, st := callForeign("uncompress", z)
	out = append(out, "uncompress="+itoa(st)+":"+strconv.FormatBool(string(back) == string(in)))
	_, st = callForeign("uncompress", []byte("not zlib"))
	out = append(out, "corrupt="+itoa(st))
	_, st = callForeign("clear_route_cache", nil)
	out = append(out, "clear="+itoa(st))
	_, st = callForeign("no_such_function", []byte("x"))
	out = append(out, "unknown="+itoa(st))
	return strings.Join(out, " ")
}

var spinSink uint64

// spin mixes a value rounds times: work the compiler cannot drop.
func spin(rounds int) uint64 {
	x := uint64(rounds) | 1
	for i := 0; i < rounds; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}
