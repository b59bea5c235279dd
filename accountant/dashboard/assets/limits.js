// The limits page: this period's budget and quota counters with Reset,
// Credit and Override, the per-node overrides with their rollout state,
// and a form to set one within its limit's ceiling. A delegated admin
// writes only below its scope, the API's rule; the page greys out what
// the API would refuse and says why.
'use strict';
(() => {
  const { $, el, api, amount, pct, time } = TT;
  const PER_PAGE = 20;
  const state = { limits: [], defs: [], overrides: [], page: 0, keys: null };

  const dimsText = (d) => (d ? Object.entries(d).map(([k, v]) => `${k}=${v}`).join(' ') : '');
  const def = (id) => state.defs.find((d) => d.limit_id === id);
  const notBelow = 'a delegated admin writes only below its scope; ask an admin for this node';

  async function load() {
    const [l, g, o] = await Promise.all([api('spend/limits'), api('governance/limits'), api('overrides')]);
    state.limits = l.limits;
    state.defs = g.definitions;
    state.overrides = o.overrides;
    renderCounters();
    renderOverrides();
    fillLimitSelect();
    TT.loaded('limits');
  }

  function renderCounters() {
    const box = $('counters');
    state.rows = [['limit_id', 'node', 'dims', 'type', 'period', 'unit', 'used', 'amount', 'fraction', 'credited', 'override', 'resets_at']];
    for (const x of state.limits) state.rows.push([x.limit_id, x.node, dimsText(x.dims), x.type, x.period, x.unit, x.used, x.amount, x.fraction, x.credited || '', x.override ? 'yes' : '', x.resets_at]);
    if (!state.limits.length) {
      box.replaceChildren(el('p', { class: 'none', text: 'No budget or quota applies to the nodes this token manages.' }));
      $('counters-pager').replaceChildren();
      return;
    }
    state.page = Math.min(state.page, Math.ceil(state.limits.length / PER_PAGE) - 1);
    const head = el('tr', null, ...['Limit', 'Node', 'Used this period', '', 'Resets', ''].map((h) => el('th', { scope: 'col', text: h })));
    const rows = state.limits.slice(state.page * PER_PAGE, (state.page + 1) * PER_PAGE).map((x) => {
      const d = def(x.limit_id);
      const ok = TT.below(x.node);
      const why = ok ? null : notBelow;
      const act = el('td', { class: 'actions' });
      if (x.counter) {
        act.append(el('button', { type: 'button', class: 'small', 'data-action': 'reset', disabled: !ok, title: why || 'Take this counter back to zero for the rest of its period', onclick: () => reset(x) }, 'Reset'),
          el('button', { type: 'button', class: 'small', 'data-action': 'credit', disabled: !ok, title: why || 'Give back part of this counter', onclick: () => credit(x) }, 'Credit'));
      }
      if (d && d.override_allowed) {
        act.append(el('button', { type: 'button', class: 'small', 'data-action': 'override', disabled: !ok, title: why || 'Set this node\'s own amount', onclick: () => override(x.limit_id, x.node) }, 'Override'));
      }
      const meter = el('div', { class: 'meter', role: 'meter', 'aria-valuemin': '0', 'aria-valuemax': '100', 'aria-valuenow': String(Math.round(x.fraction * 100)), 'aria-label': x.limit_id + ' used' }, el('span'));
      meter.firstChild.style.width = Math.min(100, x.fraction * 100) + '%';
      const notes = [];
      if (x.override) notes.push('override');
      if (x.credited) notes.push(amount(x.credited, x.unit) + ' reset or credited');
      return el('tr', { 'data-limit': x.limit_id, 'data-node': x.node, 'data-counter': x.counter || '', 'data-used': String(x.used), class: x.fraction >= 1 ? 'over' : '' },
        el('td', { class: 'name' }, el('strong', { text: x.limit_id }), el('br'), el('span', { class: 'hint', text: `${x.type} per ${x.period}` + (x.dims ? ' · ' + dimsText(x.dims) : '') })),
        el('td', { class: 'name', title: x.node, text: x.node }),
        el('td', { class: 'figs' }, `${amount(x.used, x.unit)} of ${amount(x.amount, x.unit)} · ${pct(x.fraction)}`, notes.length ? el('br') : null, notes.length ? el('span', { class: 'hint', text: notes.join(' · ') }) : null),
        el('td', { class: 'meter-cell' }, meter),
        el('td', { text: time(x.resets_at) }),
        act);
    });
    box.replaceChildren(el('table', { class: 'list' }, el('thead', null, head), el('tbody', null, ...rows)));
    TT.pager($('counters-pager'), state.limits.length, PER_PAGE, state.page, (p) => { state.page = p; renderCounters(); });
  }

  function ovAmount(o) {
    if (o.amount) return TT.usd(o.amount.usd);
    return TT.int(o.amount_count);
  }

  function renderOverrides() {
    const box = $('overrides');
    if (!state.overrides.length) { box.replaceChildren(el('p', { class: 'none', text: 'No override: every instance has its limit\'s amount.' })); return; }
    const head = el('tr', null, ...['Limit @ node', 'Amount', 'State', 'Set', ''].map((h) => el('th', { scope: 'col', text: h })));
    const rows = state.overrides.map((o) => el('tr', { 'data-limit': o.limit_id, 'data-node': o.node, 'data-state': o.state },
      el('td', { class: 'name' }, el('strong', { text: o.limit_id }), el('br'), el('span', { class: 'hint', text: o.node })),
      el('td', { text: ovAmount(o) }),
      el('td', null, el('span', { class: 'badge ' + o.state, text: o.state.replace('_', ' ') }), o.reason ? el('p', { class: 'hint reason', text: o.reason }) : null),
      el('td', { text: time(o.set_at) + ' by ' + o.set_by }),
      el('td', { class: 'actions' }, el('button', { type: 'button', class: 'small danger', disabled: !TT.below(o.node), title: TT.below(o.node) ? 'Back to the limit\'s own amount' : notBelow, onclick: () => removeOverride(o) }, 'Remove'))));
    box.replaceChildren(el('table', { class: 'list' }, el('thead', null, head), el('tbody', null, ...rows)));
  }

  // ---- the override form ----------------------------------------------
  function fillLimitSelect() {
    const sel = $('ov-limit');
    const prev = sel.value;
    const defs = state.defs.filter((d) => d.override_allowed);
    sel.replaceChildren(...defs.map((d) => el('option', { value: d.limit_id, selected: d.limit_id === prev }, `${d.limit_id} (${d.limit_type} per ${d.period})`)));
    if (!defs.length) sel.append(el('option', { value: '', text: 'no limit allows overrides (override: { allow: true } in the config)' }));
    fillNodeSelect();
  }

  function ceilingText(d) {
    if (!d) return '';
    const base = d.amount ? TT.usd(d.amount.usd) : TT.int(d.amount_count);
    const max = d.override_max ? TT.usd(d.override_max.usd) : d.override_max_count ? TT.int(d.override_max_count) : '';
    return `The limit's amount is ${base}` + (max ? `; an override may go up to ${max}.` : '; an override may set any amount above 0.') +
      (d.limit_type === 'budget_usd' ? ' Dollars.' : ` A count of ${d.unit}.`);
  }

  async function fillNodeSelect() {
    const id = $('ov-limit').value;
    const d = def(id);
    $('ov-ceiling').textContent = ceilingText(d);
    const sel = $('ov-node');
    const prev = sel.value;
    let nodes = [];
    if (d && d.level === 'key') {
      if (!state.keys) state.keys = (await api('keys')).keys.filter((k) => k.state !== 'revoked');
      nodes = state.keys.map((k) => k.owner + '/key:' + k.kid);
    } else if (d) {
      nodes = [...new Set(state.limits.filter((x) => x.limit_id === id).map((x) => x.node))];
    }
    nodes = nodes.filter(TT.below);
    sel.replaceChildren(...nodes.map((n) => el('option', { value: n, selected: n === prev }, n)));
    if (!nodes.length) sel.append(el('option', { value: '', text: 'no instance of this limit this token may override' }));
  }

  // amountBody is an override's or a credit's amount in its limit's shape.
  function amountBody(type, v, body) {
    const n = Number(v);
    if (!v || !isFinite(n) || n <= 0) throw new Error('Give an amount above 0' + (type === 'budget_usd' ? ', in dollars (5, 0.25).' : ', a whole count.'));
    if (type === 'budget_usd') body.amount_usd = n;
    else {
      if (!Number.isInteger(n)) throw new Error('Give a whole count.');
      body.amount = n;
    }
    return body;
  }

  async function putOverride(limitID, node, value) {
    const d = def(limitID);
    const o = await api('overrides', { method: 'PUT', body: amountBody(d ? d.limit_type : '', value, { limit_id: limitID, node }) });
    TT.notice(`Override of ${limitID} at ${node} set to ${ovAmount(o)}: ${o.state.replace('_', ' ')}${o.reason ? ' (' + o.reason + ')' : ''}.`);
    await load();
    return o;
  }

  async function submitOverride(ev) {
    ev.preventDefault();
    const err = $('ov-error');
    err.hidden = true;
    try {
      await putOverride($('ov-limit').value, $('ov-node').value, $('ov-amount').value.trim());
      $('ov-amount').value = '';
    } catch (e) {
      err.textContent = e.message;
      err.hidden = false;
    }
  }

  function override(limitID, node) {
    const d = def(limitID);
    return TT.ask({
      title: `Override ${limitID} at ${node}`,
      text: ceilingText(d),
      fields: [{ id: 'amount', label: d && d.limit_type === 'budget_usd' ? 'Amount (dollars)' : 'Amount', required: true, inputmode: 'decimal' }],
      ok: 'Set override',
      submit: (v) => putOverride(limitID, node, v.amount),
    });
  }

  function removeOverride(o) {
    return TT.ask({
      title: `Remove the override of ${o.limit_id} at ${o.node}?`,
      text: 'The instance goes back to the limit\'s own amount at the gateways\' next sync.',
      ok: 'Remove', danger: true,
      submit: async () => {
        await api('overrides', { method: 'DELETE', params: { limit_id: o.limit_id, node: o.node } });
        TT.notice(`Removed the override of ${o.limit_id} at ${o.node}.`);
        await load();
        return true;
      },
    });
  }

  // ---- reset and credit ------------------------------------------------
  function counterBody(x) {
    const body = { limit_id: x.limit_id, node: x.node };
    if (x.dims) body.dims = x.dims;
    return body;
  }
  function adjusted(r) {
    const verb = r.kind === 'reset' ? 'Reset' : 'Credited';
    TT.notice(`${verb} ${r.limit_id} at ${r.node}: ${amount(r.before, r.unit)} before, ${amount(r.after, r.unit)} now.`);
  }
  function reset(x) {
    return TT.ask({
      title: `Reset ${x.limit_id} at ${x.node}?`,
      text: `Takes the counter (${amount(x.used, x.unit)} of ${amount(x.amount, x.unit)} ${TT.thisPeriod(x.period)}) back to zero for the rest of its period. The calls stay in the ledger and in spend reports; this is recorded in the audit log under your name.`,
      ok: 'Reset', danger: true,
      submit: async () => {
        const r = await api('counters/reset', { method: 'POST', body: counterBody(x) });
        adjusted(r);
        await load();
        return r;
      },
    });
  }
  function credit(x) {
    return TT.ask({
      title: `Credit ${x.limit_id} at ${x.node}`,
      text: `Gives back part of the counter (${amount(x.used, x.unit)} of ${amount(x.amount, x.unit)} ${TT.thisPeriod(x.period)}), at most what it holds, for the rest of its period.`,
      fields: [{ id: 'amount', label: x.unit === 'usd' ? 'Dollars to give back' : `${x.unit} to give back`, required: true, inputmode: 'decimal' }],
      ok: 'Credit',
      submit: async (v) => {
        const r = await api('counters/credit', { method: 'POST', body: amountBody(x.type, v.amount, counterBody(x)) });
        adjusted(r);
        await load();
        return r;
      },
    });
  }

  TT.page('limits', {
    init() {
      $('ov-form').addEventListener('submit', submitOverride);
      $('ov-limit').addEventListener('change', () => fillNodeSelect());
      $('counters-csv').addEventListener('click', () => state.rows && TT.download('limits-' + new Date().toISOString().slice(0, 10) + '.csv', state.rows));
    },
    async show() {
      state.keys = null;
      try {
        await load();
      } catch (e) {
        if (e.status !== 401) TT.notice('Could not load the limits: ' + e.message, 'bad');
      }
    },
    reset() { state.limits = []; state.defs = []; state.overrides = []; state.keys = null; },
  });
})();
