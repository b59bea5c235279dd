package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// profiler counts every guest function's calls and its self time (wall
// time spent in it less the time spent in the functions it called), for
// TT_WASMEXEC_PROFILE. The listener's own cost inflates functions called
// very often; read the table for where the time goes, not for its digits.
type profiler struct {
	stats map[string]*fnStat
	stack []frame
}

type fnStat struct {
	calls int
	self  time.Duration
}

type frame struct {
	stat     *fnStat
	start    time.Time
	children time.Duration
}

func newProfiler() *profiler { return &profiler{stats: map[string]*fnStat{}} }

func (p *profiler) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	name := def.DebugName()
	st, ok := p.stats[name]
	if !ok {
		st = &fnStat{}
		p.stats[name] = st
	}
	return &fnListener{p: p, stat: st}
}

type fnListener struct {
	p    *profiler
	stat *fnStat
}

func (l *fnListener) Before(context.Context, api.Module, api.FunctionDefinition, []uint64, experimental.StackIterator) {
	l.p.stack = append(l.p.stack, frame{stat: l.stat, start: time.Now()})
}

func (l *fnListener) After(context.Context, api.Module, api.FunctionDefinition, []uint64) {
	l.p.pop()
}

func (l *fnListener) Abort(context.Context, api.Module, api.FunctionDefinition, error) {
	l.p.pop()
}

func (p *profiler) pop() {
	n := len(p.stack)
	if n == 0 {
		return
	}
	f := p.stack[n-1]
	p.stack = p.stack[:n-1]
	elapsed := time.Since(f.start)
	f.stat.calls++
	f.stat.self += elapsed - f.children
	if n > 1 {
		p.stack[n-2].children += elapsed
	}
}

// report writes the top functions by self time.
func (p *profiler) report(w io.Writer, top int) {
	type row struct {
		name string
		*fnStat
	}
	var rows []row
	var total time.Duration
	for name, st := range p.stats {
		if st.calls > 0 {
			rows = append(rows, row{name, st})
			total += st.self
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].self > rows[j].self })
	fmt.Fprintf(w, "wasmexec: guest self time by function (%v in all)\n", total)
	for i, r := range rows {
		if i == top {
			break
		}
		fmt.Fprintf(w, "%6.2f%% %12v %10d calls  %s\n", 100*float64(r.self)/float64(total), r.self, r.calls, r.name)
	}
}
