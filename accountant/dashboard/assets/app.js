// The spend page. It reads GET /tt/api/v1/spend and spend/limits with the
// token it was signed in with and draws what they answer as SVG; the
// accountant confines a delegated token to its subtree, so nothing here
// decides who may see what.
'use strict';
(() => {
  const { $, el, svg, usd, int, pct, amount, api } = TT;
  // ?refresh=SECONDS (at least 1) for a wall display or a test; 10 by default.
  const REFRESH_MS = Math.max(1, Number(new URLSearchParams(location.search).get('refresh')) || 10) * 1000;
  const RETRY_NOT_READY_MS = 2000;
  const MAX_SERIES = 8; // the rest is summed as "other"
  const LIMITS_PER_PAGE = 10;
  // Okabe-Ito, distinguishable with the common colour-vision deficiencies.
  const PALETTE = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#D55E00', '#F0E442', '#000000'];
  const OTHER = '#9aa6b2';
  const DEPTH_DIM = ['org', 'team', 'user', 'key'];
  const RANGE_PERIOD = { today: 'day', month: 'month' };

  const state = {
    node: '', key: '', range: 'month', stack: 'node', mode: 'bucket', flatDim: 'key', flatTop: 25, limitsPage: 0,
    timer: null, refreshes: 0, busy: false, generation: 0, shown: false, noCustomer: false, last: null,
  };
  const scope = () => TT.state.scope || '';

  const spent = (v) => Number(v.priced_usd || 0) + Number(v.estimated_usd || 0);
  // money is a group's dollars as shown: an UNPRICED group is never "$0".
  function money(v) {
    const s = spent(v);
    if (v.unpriced_requests > 0) return s ? usd(s) + ' + UNPRICED' : 'UNPRICED (' + int(v.unpriced_requests) + ' req)';
    return usd(s);
  }

  // ---- time ----------------------------------------------------------
  const iso = (d) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');
  function utcMidnight(d, days) { return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + (days || 0))); }
  function rangeQuery(range, now) {
    const to = new Date(Math.floor(now.getTime() / 3600000) * 3600000 + 3600000);
    switch (range) {
      case 'today': return { from: iso(utcMidnight(now)), to: iso(to), bucket: 'hour' };
      case '7d': return { from: iso(utcMidnight(now, -6)), to: iso(to), bucket: 'day' };
      case '30d': return { from: iso(utcMidnight(now, -29)), to: iso(to), bucket: 'day' };
      case '12w': {
        const back = (now.getUTCDay() + 6) % 7; // days since Monday
        return { from: iso(utcMidnight(now, -back - 77)), to: iso(to), bucket: 'week' };
      }
      default: return { from: iso(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1))), to: iso(to), bucket: 'day' };
    }
  }
  function bucketLabel(s, bucket) {
    const d = new Date(s);
    const mon = d.toLocaleString('en-US', { month: 'short', timeZone: 'UTC' });
    if (bucket === 'hour') return String(d.getUTCHours()).padStart(2, '0') + ':00';
    if (bucket === 'month') return mon + ' ' + d.getUTCFullYear();
    return mon + ' ' + d.getUTCDate();
  }
  function until(s) {
    const ms = new Date(s).getTime() - Date.now();
    if (ms <= 0) return 'now';
    const h = Math.floor(ms / 3600000);
    if (h >= 48) return Math.floor(h / 24) + ' days';
    if (h >= 1) return h + ' h';
    return Math.max(1, Math.floor(ms / 60000)) + ' min';
  }

  // ---- the tree --------------------------------------------------------
  const depth = (node) => (node ? node.split('/').length : 0);
  function childDim() {
    if (state.key) return 'model';
    return DEPTH_DIM[Math.min(depth(state.node), 3)];
  }
  function stackDim() {
    if (state.stack === 'model') return 'model';
    if (state.stack === 'key') return state.key ? 'model' : 'key';
    return childDim();
  }
  // Whether a group value of dim can be drilled into from here.
  function drillable(dim, value) {
    if (!value) return false;
    if (dim === 'key') return !state.key;
    if (dim === 'org' || dim === 'team' || dim === 'user') return value !== state.node && depth(value) > depth(state.node);
    return false;
  }
  function drill(dim, value) {
    if (dim === 'key') state.key = value; else { state.node = value; state.key = ''; }
    refresh(true);
  }
  function emptyName(dim) {
    if (dim === 'limit') return '(no limit: key, scope or request refused)';
    if (['org', 'team', 'user', 'node', 'key'].includes(dim)) return '(no key)';
    return '(none)';
  }
  // groupName is how a group reads: a key by its name and kid.
  function groupName(dim, g, rep) {
    if (g.other) return `other (${g.groups})`;
    const v = g.key[dim];
    if (!v) return emptyName(dim);
    if (dim === 'key') {
      const name = rep && rep.key_names ? rep.key_names[v] : '';
      return name ? `${name} (${v})` : v;
    }
    if (['org', 'team', 'user'].includes(dim)) {
      if (v === state.node) return v.split('/').pop() + ' (its own keys)';
      if (state.node && v.startsWith(state.node + '/')) return v.slice(state.node.length + 1);
    }
    return v;
  }

  // ---- refresh ---------------------------------------------------------
  async function refresh(userAction) {
    clearTimeout(state.timer);
    if (!state.shown) return;
    const gen = ++state.generation;
    state.busy = true;
    const rq = rangeQuery(state.range, new Date());
    const base = { from: rq.from, to: rq.to, bucket: rq.bucket };
    if (state.node) base.node = state.node;
    if (state.key) base.key = state.key;
    const sd = stackDim();
    try {
      const flatDim = state.flatDim === 'customer' && state.noCustomer ? 'key' : state.flatDim;
      const [stacked, refusals, limits, flat] = await Promise.all([
        api('spend', { params: { ...base, group_by: sd, top: 25 } }),
        api('spend', { params: { ...base, group_by: 'limit', decision: 'refused', top: 12 } }),
        api('spend/limits'),
        api('spend', { params: { ...base, bucket: 'month', group_by: flatDim, top: state.flatTop } }).catch((e) => {
          if (flatDim === 'customer' && e.status === 400) { state.noCustomer = true; return null; }
          throw e;
        }),
      ]);
      let unpricedModels = null;
      if (stacked.total.unpriced_requests > 0) {
        unpricedModels = await api('spend', { params: { ...base, group_by: 'model', cost: 'unpriced', bucket: rq.bucket, top: 10 } });
      }
      if (gen !== state.generation) return; // a newer refresh started
      if (scope() && !state.node) { state.node = scope(); return refresh(userAction); }
      state.last = { rq, stacked, stackDim: sd, refusals, limits, unpricedModels, flat, flatDim };
      render(state.last);
      $('banner').hidden = true;
      $('status').classList.remove('stale');
      $('status').textContent = 'Updated ' + new Date().toISOString().slice(11, 19) + ' UTC · refreshes every ' + REFRESH_MS / 1000 + ' s';
      state.refreshes++;
      document.body.dataset.refreshes = String(state.refreshes);
      document.body.dataset.state = 'ready';
      TT.loaded('spend');
      schedule(REFRESH_MS);
    } catch (e) {
      if (gen !== state.generation || e.status === 401) return;
      const b = $('banner');
      b.hidden = false;
      if (e.type === 'not_ready') {
        b.className = 'banner info';
        b.textContent = 'Spend history is still being read from the ledger: ' + e.message;
        document.body.dataset.state = 'not_ready';
        schedule(RETRY_NOT_READY_MS);
      } else {
        b.className = 'banner';
        b.textContent = (e.status === 403 ? 'Not allowed: ' : 'Could not refresh: ') + e.message + (e.status === 403 ? '' : ' · retrying every ' + REFRESH_MS / 1000 + ' s; the figures below are from the last good refresh.');
        $('status').classList.add('stale');
        document.body.dataset.state = 'error';
        if (e.status === 403 && userAction) { state.node = scope(); state.key = ''; }
        schedule(REFRESH_MS);
      }
    } finally {
      state.busy = false;
    }
  }
  function schedule(ms) {
    clearTimeout(state.timer);
    if (document.hidden || !state.shown) return; // resumed on visibilitychange, or when shown
    state.timer = setTimeout(() => refresh(false), ms);
  }

  // ---- render ----------------------------------------------------------
  function render(d) {
    renderCrumbs();
    renderKPIs(d.stacked.total);
    renderUnpriced(d.stacked.total, d.unpricedModels);
    renderFleet([d.stacked, d.refusals, d.unpricedModels, d.flat]);
    renderSpendChart(d);
    renderTop(d.stacked, d.stackDim);
    renderLimits(d.limits);
    renderFlat(d.flat, d.flatDim);
    renderRefusals(d.refusals, d.rq);
    const rows = d.stacked.source.rows ? ` · ${int(d.stacked.source.rows)} ledger rows summed` : '';
    $('footer').textContent = `Reports ${d.stacked.from} to ${d.stacked.to} (UTC, ${d.stacked.bucket} buckets)${rows} · ${d.stacked.note}`;
  }

  // A fleet's report covers every accountant's ledger; one that did not
  // answer is left out of the figures, and the page says so above them.
  function renderFleet(reps) {
    const f = $('fleet');
    const rep = reps[0];
    if (!rep.fleet) { f.hidden = true; f.dataset.partial = 'false'; return; }
    // The panels are several reports: the page is partial if any was.
    const down = new Map();
    for (const r of reps) {
      if (!r || !r.fleet) continue;
      for (const a of r.source.replicas || []) if (!a.answered && !down.has(a.accountant)) down.set(a.accountant, a);
    }
    const all = rep.source.replicas || [];
    f.hidden = false;
    f.className = down.size ? 'fleet partial' : 'fleet';
    f.dataset.partial = String(down.size > 0);
    f.dataset.accountants = String(all.length);
    f.dataset.answered = String(all.length - down.size);
    const head = down.size
      ? `Partial: ${down.size} of ${all.length} accountants of the fleet did not answer; what their replicas recorded is not in these figures.`
      : `Fleet: all ${all.length} accountants answered; the figures cover every replica's ledger.`;
    const items = all.map((a) => {
      const d = down.get(a.accountant);
      const seen = d && d.last_seen ? `; last heard from ${d.last_seen.slice(0, 19).replace('T', ' ')} UTC` : '';
      return el('li', { class: d ? 'down' : 'up', 'data-accountant': a.accountant, 'data-answered': String(!d),
        text: a.accountant + (a.self ? ' (this one)' : '') + (d ? ` did not answer: ${d.error || 'no answer'}${seen}` : '') });
    });
    const overlaps = (rep.source.overlaps || []).map((o) => el('li', { class: 'down',
      text: `rows of gateway replica ${o.replica} are in the ledgers of ${o.accountants.join(', ')}: a request may be counted twice` }));
    f.replaceChildren(el('span', { text: head }), el('ul', {}, ...items, ...overlaps));
  }

  function renderCrumbs() {
    const nav = $('crumbs');
    nav.replaceChildren();
    const parts = [];
    const root = scope();
    parts.push({ label: root ? root : 'All spend', node: root, key: '' });
    if (state.node && state.node !== root) {
      const segs = state.node.split('/');
      for (let i = depth(root); i < segs.length; i++) {
        const n = segs.slice(0, i + 1).join('/');
        parts.push({ label: segs[i], node: n, key: '' });
      }
    }
    if (state.key) parts.push({ label: 'key:' + state.key, node: state.node, key: state.key });
    parts.forEach((p, i) => {
      if (i > 0) nav.append(el('span', { class: 'sep', 'aria-hidden': 'true', text: '›' }));
      if (i === parts.length - 1) {
        nav.append(el('span', { 'aria-current': 'page', 'data-node': p.node, text: p.label }));
      } else {
        nav.append(el('a', { href: '#spend', 'data-node': p.node, onclick: (ev) => { ev.preventDefault(); state.node = p.node; state.key = p.key; refresh(true); } }, p.label));
      }
    });
  }

  function renderKPIs(t) {
    $('kpi-priced').textContent = usd(t.priced_usd);
    $('kpi-priced').dataset.value = String(t.priced_usd);
    $('kpi-estimated').textContent = usd(t.estimated_usd);
    $('kpi-estimated').dataset.value = String(t.estimated_usd);
    $('kpi-unpriced').textContent = int(t.unpriced_requests) + ' req';
    $('kpi-unpriced').dataset.value = String(t.unpriced_requests);
    $('kpi-unpriced-tokens').textContent = t.unpriced_requests ? int(t.unpriced_tokens) + ' tokens with no dollar figure' : 'every request priced';
    $('kpi-unpriced-box').classList.toggle('alert', t.unpriced_requests > 0);
    $('kpi-requests').textContent = int(t.requests);
    $('kpi-requests').dataset.value = String(t.requests);
    $('kpi-refused').textContent = t.requests ? int(t.refused) + ' refused (' + pct(t.refused / t.requests) + ')' : 'no traffic';
    $('kpi-tokens').textContent = int(t.input_tokens + t.output_tokens);
    $('kpi-tokens-split').textContent = int(t.input_tokens) + ' in · ' + int(t.output_tokens) + ' out';
  }

  function renderUnpriced(t, models) {
    const u = $('unpriced');
    if (!t.unpriced_requests) { u.hidden = true; return; }
    u.hidden = false;
    const names = models ? models.groups.filter((g) => !g.other).map((g) => `${g.key.model || '(none)'} (${int(g.total.unpriced_requests)})`) : [];
    u.replaceChildren(el('strong', { text: 'UNPRICED: ' }),
      `${int(t.unpriced_requests)} request(s), ${int(t.unpriced_tokens)} tokens, went to models with no price and are in no dollar figure on this page` +
      (names.length ? ': ' + names.join(', ') : '') + '. Add these models to the accountant\'s ', el('code', { text: '--pricing' }), ' file.');
  }

  // series turns a report's groups into at most MAX_SERIES series of
  // per-bucket values, the rest summed as "other"; each keeps its total
  // Values so a legend can say UNPRICED.
  function series(rep, dim, value) {
    const idx = new Map(rep.buckets.map((b, i) => [b, i]));
    const all = rep.groups.map((g) => {
      const vals = new Array(rep.buckets.length).fill(0);
      for (const p of g.series) vals[idx.get(p.start)] += value(p);
      return { g, vals, total: value(g.total) };
    });
    const keep = all.length <= MAX_SERIES ? all : all.slice(0, MAX_SERIES - 1);
    let other = null;
    const addOther = (x) => {
      const n = x.g.other ? x.g.groups : 1;
      const up = Number(x.g.total.unpriced_requests || 0);
      if (!other) other = { vals: x.vals.slice(), total: x.total, count: n, unpriced: up };
      else { other.vals = other.vals.map((v, j) => v + x.vals[j]); other.total += x.total; other.count += n; other.unpriced += up; }
    };
    const out = [];
    for (const x of keep) {
      if (x.g.other) { addOther(x); continue; }
      const v = x.g.key[dim] || '';
      out.push({ id: v, name: groupName(dim, x.g, rep), vals: x.vals, total: x.total, unpriced: Number(x.g.total.unpriced_requests || 0),
        color: PALETTE[out.length % PALETTE.length], drill: drillable(dim, v) ? () => drill(dim, v) : null });
    }
    all.slice(keep.length).forEach(addOther);
    if (other) out.push({ id: '(other)', name: `other (${other.count})`, vals: other.vals, total: other.total, unpriced: other.unpriced, color: OTHER });
    return out;
  }
  // seriesMoney is a series' dollars as a legend shows them.
  const seriesMoney = (s) => money({ priced_usd: s.total, estimated_usd: 0, unpriced_requests: s.unpriced });

  function renderSpendChart(d) {
    const rep = d.stacked, dim = d.stackDim;
    let ss = series(rep, dim, spent);
    if (state.mode === 'cumulative') {
      ss = ss.map((s) => { let run = 0; return { ...s, vals: s.vals.map((v) => (run += v)) }; });
    }
    const budgets = [];
    if (!state.key && state.node) {
      const want = state.mode === 'cumulative' ? RANGE_PERIOD[state.range] : rep.bucket;
      for (const l of d.limits.limits) {
        if (l.type === 'budget_usd' && l.node === state.node && l.period === want && !l.dims) {
          budgets.push({ id: l.limit_id, label: `${l.limit_id} ${usd(Number(l.amount))}/${l.period}`, amount: Number(l.amount) });
        }
      }
    }
    const what = state.mode === 'cumulative' ? 'cumulative spend' : 'spend per ' + rep.bucket;
    drawStacked($('spend-chart'), {
      buckets: rep.buckets, bucket: rep.bucket, series: ss, budgets, money: true,
      label: `${what}, priced plus estimated, stacked by ${dim}`,
      empty: 'No spend in this range yet. Traffic appears here a few seconds after the gateway serves it.',
    });
    legend($('spend-legend'), ss, seriesMoney);
    dataTable($('spend-table'), rep.buckets, rep.bucket, ss, usd);
    state.spendRows = [[rep.bucket, ...ss.map((s) => s.name)], ...rep.buckets.map((b, i) => [b, ...ss.map((s) => s.vals[i])])];
  }

  function renderRefusals(rep, rq) {
    const ss = series(rep, 'limit', (v) => v.refused || 0);
    drawStacked($('refusals-chart'), {
      buckets: rep.buckets, bucket: rep.bucket, series: ss, budgets: [], money: false, height: 200,
      label: 'refused requests per ' + rq.bucket + ', stacked by the limit that refused',
      empty: 'No refusals in this range.',
    });
    legend($('refusals-legend'), ss, (s) => int(s.total));
  }

  function legend(ul, ss, fmt) {
    ul.replaceChildren();
    for (const s of ss) {
      const name = s.drill ? el('button', { type: 'button', onclick: s.drill, title: 'Drill down into ' + s.name }, s.name) : el('span', { text: s.name });
      ul.append(el('li', { 'data-series': s.id }, el('span', { class: 'sw', 'aria-hidden': 'true' }), name, el('span', { class: 'val', text: fmt(s) })));
      ul.lastChild.firstChild.style.background = s.color;
    }
  }

  function dataTable(box, buckets, bucket, ss, fmt) {
    const head = el('tr', null, el('th', { scope: 'col', text: bucket }), ...ss.map((s) => el('th', { scope: 'col', text: s.name })));
    const rows = buckets.map((b, i) => el('tr', null, el('th', { scope: 'row', text: bucketLabel(b, bucket) }), ...ss.map((s) => el('td', { text: fmt(s.vals[i]) }))));
    box.replaceChildren(el('table', null, el('thead', null, head), el('tbody', null, ...rows)));
  }

  function niceMax(v) {
    if (v <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  function drawStacked(box, o) {
    const W = 960, H = o.height || 300, L = 72, R = 16, T = 16, B = 30;
    const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': o.label });
    const n = o.buckets.length;
    const tops = new Array(n).fill(0);
    for (const s of o.series) s.vals.forEach((v, i) => { tops[i] += v; });
    const dataMax = Math.max(0, ...tops);
    if (dataMax === 0) {
      root.append(svg('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'empty' }, o.empty));
      box.replaceChildren(root);
      return;
    }
    let yMax = dataMax;
    const off = [];
    for (const b of o.budgets) { if (b.amount <= dataMax * 4) yMax = Math.max(yMax, b.amount); else off.push(b); }
    yMax = o.money ? niceMax(yMax * 1.05) : Math.max(4, Math.ceil(niceMax(yMax * 1.05) / 4) * 4);
    const y = (v) => T + (H - T - B) * (1 - v / yMax);
    const band = (W - L - R) / n;
    const fmt = o.money ? usd : int;
    const axis = svg('g', { class: 'axis' });
    for (let k = 0; k <= 4; k++) {
      const v = (yMax * k) / 4;
      axis.append(svg('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid-line' }));
      axis.append(svg('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, fmt(v)));
    }
    const every = Math.ceil(n / 12);
    o.buckets.forEach((b, i) => {
      if (i % every === 0) axis.append(svg('text', { x: L + band * (i + 0.5), y: H - 10, 'text-anchor': 'middle' }, bucketLabel(b, o.bucket)));
    });
    root.append(axis);
    const base = new Array(n).fill(0);
    for (const s of o.series) {
      const g = svg('g', { class: 'series', 'data-series': s.id, 'data-total': String(s.total), fill: s.color });
      s.vals.forEach((v, i) => {
        if (v <= 0) return;
        const y0 = y(base[i]), y1 = y(base[i] + v);
        const r = svg('rect', { class: 'seg', x: L + band * i + band * 0.15, width: Math.max(1, band * 0.7), y: y1, height: Math.max(0.5, y0 - y1), 'data-bucket': o.buckets[i], 'data-value': String(v) });
        r.append(svg('title', {}, `${s.name} · ${bucketLabel(o.buckets[i], o.bucket)}: ${fmt(v)}`));
        g.append(r);
        base[i] += v;
      });
      root.append(g);
    }
    for (const b of o.budgets) {
      if (off.includes(b)) continue;
      const g = svg('g', { class: 'budget-g', 'data-limit': b.id, 'data-amount': String(b.amount) });
      g.append(svg('line', { class: 'budget', x1: L, x2: W - R, y1: y(b.amount), y2: y(b.amount) }));
      g.append(svg('text', { class: 'budget-label', x: W - R - 4, y: y(b.amount) - 5, 'text-anchor': 'end' }, 'budget ' + b.label));
      root.append(g);
    }
    off.forEach((b, k) => {
      const g = svg('g', { class: 'budget-g off', 'data-limit': b.id, 'data-amount': String(b.amount) });
      g.append(svg('text', { class: 'budget-label', x: W - R - 4, y: T + 12 + k * 14, 'text-anchor': 'end' }, `↑ budget ${b.label}, ${pct(dataMax / b.amount)} used at the highest point`));
      root.append(g);
    });
    box.replaceChildren(root);
  }

  // groupTable draws a report's groups as a table (name, dollars,
  // UNPRICED, requests, refused, tokens) and returns its rows for CSV.
  function groupTable(box, rep, dim, drillTo) {
    const groups = rep.groups;
    if (!groups.length) { box.replaceChildren(el('p', { class: 'none', text: 'No traffic in this range yet.' })); return [[dim]]; }
    const maxSpent = Math.max(...groups.map((g) => spent(g.total)), 0);
    const cols = [dim, 'Priced', 'Estimated', 'UNPRICED', 'Requests', 'Refused', 'Tokens'];
    const head = el('tr', null, ...cols.map((h) => el('th', { scope: 'col', text: h })));
    const csv = [[dim, ...(dim === 'key' ? ['key_name'] : []), 'priced_usd', 'estimated_usd', 'unpriced_requests', 'requests', 'refused', 'tokens']];
    const rows = groups.map((g) => {
      const v = g.key[dim];
      const name = groupName(dim, g, rep);
      const cell = drillTo && drillable(dim, v) && !g.other
        ? el('a', { href: '#spend', onclick: (ev) => { ev.preventDefault(); drill(dim, v); } }, name)
        : el('span', { text: name });
      const share = el('span', { class: 'share' });
      share.style.width = (maxSpent ? Math.round((spent(g.total) / maxSpent) * 60) : 0) + 'px';
      const t = g.total;
      const tokens = Number(t.input_tokens || 0) + Number(t.output_tokens || 0);
      const unpricedOnly = t.unpriced_requests > 0 && !spent(t);
      csv.push([g.other ? '(other)' : v || '', ...(dim === 'key' ? [g.other ? '' : (rep.key_names || {})[v] || ''] : []),
        t.priced_usd, t.estimated_usd, t.unpriced_requests, t.requests, t.refused, tokens]);
      return el('tr', { 'data-group': g.other ? '(other)' : (v || ''), 'data-spent': String(spent(t)) },
        el('td', { class: 'name', title: name }, share, cell),
        el('td', { text: unpricedOnly ? '–' : usd(t.priced_usd) }), el('td', { text: unpricedOnly ? '–' : usd(t.estimated_usd) }),
        el('td', { class: t.unpriced_requests ? 'unpriced-cell' : '', text: t.unpriced_requests ? int(t.unpriced_requests) + ' req' : '–' }),
        el('td', { text: int(t.requests) }), el('td', { text: int(t.refused) }), el('td', { text: int(tokens) }));
    });
    box.replaceChildren(el('table', null, el('thead', null, head), el('tbody', null, ...rows)));
    return csv;
  }

  function renderTop(rep, dim) { state.topRows = groupTable($('top'), rep, dim, true); }

  function renderFlat(rep, dim) {
    const sel = $('flat-dim');
    const opt = sel.querySelector('option[value=customer]');
    opt.disabled = state.noCustomer;
    opt.textContent = state.noCustomer ? 'Customer (not recorded by this accountant)' : 'Customer';
    if (!rep) { $('flat').replaceChildren(el('p', { class: 'none', text: 'This accountant does not group by customer.' })); return; }
    state.flatRows = groupTable($('flat'), rep, dim, false);
  }

  function renderLimits(l) {
    const ul = $('limits');
    ul.replaceChildren();
    // The limits of the node shown: its own, those below it, and those of
    // its ancestors that bind it.
    const inSub = (root, n) => !root || n === root || n.startsWith(root + '/');
    const shown = l.limits.filter((x) => inSub(state.node, x.node) || inSub(x.node, state.node) || x.node === '__global');
    state.limitsRows = [['limit_id', 'node', 'dims', 'type', 'period', 'unit', 'used', 'amount', 'fraction', 'resets_at']];
    for (const x of shown) {
      state.limitsRows.push([x.limit_id, x.node, x.dims ? Object.entries(x.dims).map(([k, v]) => `${k}=${v}`).join(' ') : '', x.type, x.period, x.unit, x.used, x.amount, x.fraction, x.resets_at]);
    }
    if (!shown.length) { ul.append(el('li', { class: 'empty', text: 'No budget or quota applies to this subtree.' })); $('limits-pager').replaceChildren(); return; }
    const per = LIMITS_PER_PAGE;
    state.limitsPage = Math.min(state.limitsPage, Math.ceil(shown.length / per) - 1);
    for (const x of shown.slice(state.limitsPage * per, (state.limitsPage + 1) * per)) {
      const warnAt = x.thresholds && x.thresholds.length ? x.thresholds[0] : 0.8;
      const cls = x.fraction >= 1 ? 'over' : x.fraction >= warnAt ? 'near' : '';
      const dims = x.dims ? ' ' + Object.entries(x.dims).map(([k, v]) => `${k}=${v}`).join(' ') : '';
      const meter = el('div', { class: 'meter', role: 'meter', 'aria-valuemin': '0', 'aria-valuemax': '100', 'aria-valuenow': String(Math.round(x.fraction * 100)), 'aria-label': x.limit_id + ' used' }, el('span'));
      meter.firstChild.style.width = Math.min(100, x.fraction * 100) + '%';
      const sub = [`${x.type} per ${x.period}`, 'resets in ' + until(x.resets_at)];
      if (x.thresholds && x.thresholds.length) sub.push('alerts at ' + x.thresholds.map(pct).join(', '));
      if (x.posture.mode !== 'on') sub.push(x.posture.mode);
      else if (x.posture.enforce === 'soft') sub.push('soft');
      if (x.override) sub.push('override');
      if (x.credited) sub.push(amount(x.credited, x.unit) + ' reset or credited');
      if (x.unpriced_rows) sub.push(int(x.unpriced_rows) + ' UNPRICED row(s) not in the dollars');
      ul.append(el('li', { class: 'limit ' + cls, 'data-limit': x.limit_id, 'data-node': x.node, 'data-fraction': String(x.fraction) },
        el('span', { class: 'name' }, x.limit_id, el('span', { class: 'at', text: ` @ ${x.node}${dims}` })),
        meter,
        el('span', { class: 'sub', text: sub.join(' · ') }),
        el('span', { class: 'figs', text: `${amount(x.used, x.unit)} of ${amount(x.amount, x.unit)} · ${pct(x.fraction)}` })));
    }
    TT.pager($('limits-pager'), shown.length, per, state.limitsPage, (p) => { state.limitsPage = p; renderLimits(l); });
  }

  TT.page('spend', {
    init() {
      $('range').addEventListener('change', (ev) => { state.range = ev.target.value; refresh(true); });
      $('stack').addEventListener('change', (ev) => { state.stack = ev.target.value; refresh(true); });
      $('flat-dim').addEventListener('change', (ev) => { state.flatDim = ev.target.value; refresh(true); });
      $('flat-top').addEventListener('change', (ev) => { state.flatTop = Number(ev.target.value); refresh(true); });
      const mode = (m) => {
        state.mode = m;
        $('mode-bucket').setAttribute('aria-pressed', String(m === 'bucket'));
        $('mode-cumulative').setAttribute('aria-pressed', String(m === 'cumulative'));
        refresh(true);
      };
      $('mode-bucket').addEventListener('click', () => mode('bucket'));
      $('mode-cumulative').addEventListener('click', () => mode('cumulative'));
      const stamp = () => new Date().toISOString().slice(0, 10);
      $('top-csv').addEventListener('click', () => state.topRows && TT.download(`spend-top-${stackDim()}-${stamp()}.csv`, state.topRows));
      $('flat-csv').addEventListener('click', () => state.flatRows && TT.download(`spend-by-${state.flatDim}-${stamp()}.csv`, state.flatRows));
      $('limits-csv').addEventListener('click', () => state.limitsRows && TT.download(`budgets-${stamp()}.csv`, state.limitsRows));
      $('spend-csv').addEventListener('click', () => state.spendRows && TT.download(`spend-over-time-${stamp()}.csv`, state.spendRows));
      document.addEventListener('visibilitychange', () => { if (!document.hidden && state.shown && !state.busy) refresh(false); });
    },
    show() { state.shown = true; refresh(true); },
    hide() { state.shown = false; clearTimeout(state.timer); state.generation++; },
    reset() { state.node = ''; state.key = ''; state.limitsPage = 0; state.noCustomer = false; },
  });
})();
