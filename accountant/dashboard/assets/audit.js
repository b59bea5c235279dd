// The audit log page: every write of the runtime plane and every config
// reload, newest first, filtered by action, by who and by node, paged
// back 100 at a time. A delegated admin sees the entries of its subtree.
'use strict';
(() => {
  const { $, el, api, time } = TT;
  const PAGE = 100;
  const state = { entries: [], next: 0, more: false };

  function query(before) {
    const p = { order: 'desc', limit: PAGE };
    if (before) p.before = before;
    const a = $('audit-action').value, who = $('audit-who').value.trim(), node = $('audit-node').value.trim();
    if (a) p.action = a;
    if (who) p.who = who;
    if (node) p.node = node;
    return p;
  }

  async function load(more) {
    const err = $('audit-error');
    err.hidden = true;
    try {
      const r = await api('audit', { params: query(more ? state.next : 0) });
      state.entries = more ? state.entries.concat(r.entries) : r.entries;
      state.next = r.next;
      state.more = r.entries.length === PAGE;
      render();
      TT.loaded('audit');
    } catch (e) {
      if (e.status === 401) return;
      err.textContent = e.message;
      err.hidden = false;
    }
  }

  // change says in a line what a write did, from its before and after.
  function change(e) {
    const a = e.after && e.after !== null ? e.after : {};
    const b = e.before && e.before !== null ? e.before : {};
    switch (e.action) {
      case 'key.mint': return `minted ${a.kid}${a.name ? ' (' + a.name + ')' : ''} for ${a.owner}` + (a.expires_at ? ', expires ' + time(a.expires_at) : '');
      case 'key.revoke': return `revoked ${b.kid}${b.name ? ' (' + b.name + ')' : ''}`;
      case 'key.rotate': return `rotated ${a.kid}` + (a.previous_secret_until ? '; old secret until ' + time(a.previous_secret_until) : '; old secret stopped');
      case 'override.put': return `${a.limit_id} at ${a.node}: ${b.amount !== undefined ? b.amount + ' → ' : ''}${a.amount}`;
      case 'override.delete': return `${b.limit_id} at ${b.node}: removed (was ${b.amount})`;
      case 'counter.reset': return `${a.limit_id} at ${a.node}: reset, ${a.amount} taken off (held ${a.before})`;
      case 'counter.credit': return `${a.limit_id} at ${a.node}: ${a.amount} given back (held ${a.before})`;
      case 'node.create': return `added ${a.id}`;
      case 'node.delete': return `removed ${b.id}`;
      case 'admin.create': return `delegated admin ${a.id} for ${a.scope}`;
      case 'admin.revoke': return `revoked delegated admin ${b.id}`;
      case 'config.reload': return `${a.result || ''} ${a.config || ''}${a.error ? ': ' + a.error : ''}`;
    }
    return '';
  }

  function render() {
    const box = $('audit');
    state.rows = [['seq', 'at', 'who', 'action', 'target', 'node', 'before', 'after']];
    for (const e of state.entries) state.rows.push([e.seq, e.at, e.who, e.action, e.target, e.node, JSON.stringify(e.before), JSON.stringify(e.after)]);
    $('audit-more').hidden = !state.more;
    if (!state.entries.length) { box.replaceChildren(el('p', { class: 'none', text: 'No entry matches.' })); return; }
    const head = el('tr', null, ...['#', 'When', 'Who', 'Action', 'What', 'Node'].map((h) => el('th', { scope: 'col', text: h })));
    const rows = state.entries.map((e) => el('tr', { 'data-seq': String(e.seq), 'data-action': e.action, 'data-who': e.who },
      el('td', { text: String(e.seq) }),
      el('td', { text: time(e.at) }),
      el('td', null, el('code', { text: e.who })),
      el('td', null, el('span', { class: 'badge action', text: e.action })),
      el('td', { class: 'wrap' }, change(e) || e.target,
        el('details', null, el('summary', { text: 'before / after' }),
          el('pre', { text: 'before: ' + JSON.stringify(e.before, null, 1) + '\nafter:  ' + JSON.stringify(e.after, null, 1) }))),
      el('td', { class: 'name', title: e.node, text: e.node })));
    box.replaceChildren(el('table', { class: 'list' }, el('thead', null, head), el('tbody', null, ...rows)));
  }

  TT.page('audit', {
    init() {
      $('audit-form').addEventListener('submit', (ev) => { ev.preventDefault(); load(false); });
      $('audit-action').addEventListener('change', () => load(false));
      $('audit-more').addEventListener('click', () => load(true));
      $('audit-csv').addEventListener('click', () => state.rows && TT.download('audit-' + new Date().toISOString().slice(0, 10) + '.csv', state.rows));
    },
    show() { load(false); },
    reset() { state.entries = []; },
  });
})();
