// The nodes page: the tenancy tree the token manages (the config's
// tenants and the nodes added through the API), adding a node under one
// of them and removing one added here.
'use strict';
(() => {
  const { $, el, api, time } = TT;
  const KIND = ['org', 'team', 'user'];
  const state = { nodes: [], conflicts: [] };
  const depth = (id) => (id ? id.split('/').length : 0);

  async function load() {
    const r = await api('nodes');
    state.nodes = r.nodes;
    state.conflicts = r.conflicts;
    render();
    fillParents();
    TT.loaded('nodes');
  }

  function render() {
    const box = $('nodes');
    state.rows = [['id', 'source', 'created_at', 'created_by', 'conflict']];
    for (const n of state.nodes) state.rows.push([n.id, n.source, n.created_at || '', n.created_by || '', n.conflict || '']);
    if (!state.nodes.length) { box.replaceChildren(el('p', { class: 'none', text: 'No node.' })); return; }
    const head = el('tr', null, ...['Node', 'From', 'Added', ''].map((h) => el('th', { scope: 'col', text: h })));
    const rows = state.nodes.map((n) => {
      const act = el('td', { class: 'actions' });
      if (n.source === 'runtime') {
        const ok = TT.below(n.id);
        act.append(el('button', { type: 'button', class: 'small danger', 'data-action': 'remove', disabled: !ok,
          title: ok ? 'Remove this node' : 'a delegated admin removes only nodes below its scope', onclick: () => remove(n) }, 'Remove'));
      }
      const segs = n.id.split('/');
      return el('tr', { 'data-node': n.id, 'data-source': n.source },
        el('td', { class: 'name tree', title: n.id }, el('span', { class: 'indent', text: '  '.repeat(segs.length - 1) }), segs[segs.length - 1],
          n.conflict ? el('p', { class: 'error small', text: n.conflict }) : null),
        el('td', { text: n.source === 'config' ? 'config' : 'added here' }),
        el('td', { text: n.created_at ? time(n.created_at) + ' by ' + n.created_by : '–' }),
        act);
    });
    box.replaceChildren(el('table', { class: 'list' }, el('thead', null, head), el('tbody', null, ...rows)));
  }

  function fillParents() {
    const sel = $('node-parent');
    const prev = sel.value;
    const opts = [];
    if (!TT.state.scope) opts.push(el('option', { value: '', selected: prev === '' }, '(the top: a new org)'));
    for (const n of state.nodes) {
      if (n.conflict || depth(n.id) >= 3) continue;
      if (TT.state.scope && !(n.id === TT.state.scope || n.id.startsWith(TT.state.scope + '/'))) continue;
      opts.push(el('option', { value: n.id, selected: n.id === prev }, n.id));
    }
    sel.replaceChildren(...opts);
    preview();
  }

  function newID() {
    const parent = $('node-parent').value;
    const kind = KIND[depth(parent)];
    const name = $('node-name').value.trim();
    return { id: (parent ? parent + '/' : '') + kind + ':' + name, kind, name };
  }
  function preview() {
    const n = newID();
    $('node-kind').textContent = 'a ' + n.kind;
    $('node-preview').textContent = n.name ? n.id : '–';
  }

  async function add(ev) {
    ev.preventDefault();
    const err = $('node-error');
    err.hidden = true;
    const n = newID();
    try {
      await api('nodes', { method: 'POST', body: { id: n.id } });
      TT.notice(`Added ${n.id}: keys can be minted for it now.`);
      $('node-name').value = '';
      await TT.nodes(true);
      await load();
    } catch (e) {
      err.textContent = e.message;
      err.hidden = false;
    }
  }

  function remove(n) {
    return TT.ask({
      title: `Remove ${n.id}?`,
      text: 'The node leaves the tree at the gateways\' next sync. The accountant refuses while a live key, an override or a node below still uses it.',
      ok: 'Remove', danger: true,
      submit: async () => {
        await api('nodes', { method: 'DELETE', params: { id: n.id } });
        TT.notice(`Removed ${n.id}.`);
        await TT.nodes(true);
        await load();
        return true;
      },
    });
  }

  TT.page('nodes', {
    init() {
      $('node-form').addEventListener('submit', add);
      $('node-parent').addEventListener('change', preview);
      $('node-name').addEventListener('input', preview);
      $('nodes-csv').addEventListener('click', () => state.rows && TT.download('nodes-' + new Date().toISOString().slice(0, 10) + '.csv', state.rows));
    },
    async show() {
      try {
        await load();
      } catch (e) {
        if (e.status !== 401) TT.notice('Could not load the nodes: ' + e.message, 'bad');
      }
    },
    reset() { state.nodes = []; },
  });
})();
