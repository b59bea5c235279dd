// The keys page: mint a key (owner, name, scopes, expiry; the key shown
// once), and list, rotate and revoke the keys the token manages. Every
// write goes through the management API, which checks and audits it.
'use strict';
(() => {
  const { $, el, api, time } = TT;
  const PER_PAGE = 50;
  const state = { keys: [], page: 0 };

  // scopesText says what a key may call: "any model", or its lists.
  function scopesText(sc) {
    const parts = [];
    for (const [k, label] of [['models', 'models'], ['providers', 'providers'], ['endpoints', 'endpoints'], ['customers', 'customers']]) {
      if (sc && sc[k]) parts.push(label + ' ' + (sc[k].length ? sc[k].join(', ') : 'none'));
    }
    if (sc && sc.allow_passthrough) parts.push('passthrough');
    return parts.length ? parts.join('; ') : 'any model, provider and endpoint';
  }
  const splitList = (s) => s.split(',').map((x) => x.trim()).filter(Boolean);

  // expiryFrom reads an expiry select (and its date input) into the
  // request's expires_in or expires_at; null when it is not readable.
  function expiryFrom(choice, date, out) {
    if (choice === 'date') {
      if (!date) return null;
      out.expires_at = new Date(date + 'T00:00:00Z').toISOString();
    } else if (choice) {
      out.expires_in = choice;
    }
    return out;
  }

  async function ownerOptions() {
    const sel = $('mint-owner');
    const prev = sel.value;
    const nodes = await TT.nodes(true);
    sel.replaceChildren(...nodes.map((n) => el('option', { value: n.id, selected: n.id === prev }, n.id)));
  }

  function showSecret(title, key, details) {
    $('secret-title').textContent = title;
    $('secret-key').textContent = key;
    $('secret-details').textContent = details;
    $('secret').hidden = false;
    $('secret').scrollIntoView({ block: 'nearest' });
  }

  async function load() {
    const r = await api('keys');
    state.keys = r.keys;
    render();
    TT.loaded('keys');
  }

  function filtered() {
    const q = $('keys-filter').value.trim().toLowerCase();
    const st = $('keys-state').value;
    return state.keys.filter((k) => (!st || k.state === st) &&
      (!q || k.kid.toLowerCase().includes(q) || (k.name || '').toLowerCase().includes(q) || k.owner.toLowerCase().includes(q)));
  }

  function render() {
    const keys = filtered();
    const box = $('keys');
    state.rows = [['kid', 'name', 'owner', 'state', 'expires_at', 'created_at', 'created_by', 'rotated_at', 'previous_secret_until', 'revoked_at']];
    for (const k of keys) state.rows.push([k.kid, k.name, k.owner, k.state, k.expires_at || '', k.created_at, k.created_by, k.rotated_at || '', k.previous_secret_until || '', k.revoked_at || '']);
    if (!keys.length) {
      box.replaceChildren(el('p', { class: 'none', text: state.keys.length ? 'No key matches.' : 'No key yet: mint one above.' }));
      $('keys-pager').replaceChildren();
      return;
    }
    state.page = Math.min(state.page, Math.ceil(keys.length / PER_PAGE) - 1);
    const head = el('tr', null, ...['Key', 'Owner', 'State', 'Expires', 'Created', 'Last rotated', ''].map((h) => el('th', { scope: 'col', text: h })));
    const rows = keys.slice(state.page * PER_PAGE, (state.page + 1) * PER_PAGE).map((k) => {
      const actions = el('td', { class: 'actions' });
      if (k.state !== 'revoked') {
        actions.append(el('button', { type: 'button', class: 'small', 'data-action': 'rotate', onclick: () => rotate(k) }, 'Rotate'),
          el('button', { type: 'button', class: 'small danger', 'data-action': 'revoke', onclick: () => revoke(k) }, 'Revoke'));
      }
      const rotated = k.rotated_at ? time(k.rotated_at) + (k.previous_secret_until && new Date(k.previous_secret_until) > new Date()
        ? ' (old secret until ' + time(k.previous_secret_until) + ')' : '') : '–';
      return el('tr', { 'data-kid': k.kid, 'data-state': k.state },
        el('td', { class: 'name' }, el('strong', { text: k.name || '(no name)' }), el('br'), el('code', { text: k.kid })),
        el('td', { class: 'name', title: k.owner }, k.owner, el('br'), el('span', { class: 'hint', text: scopesText(k.scopes) })),
        el('td', null, el('span', { class: 'badge ' + k.state, text: k.state })),
        el('td', { text: k.expires_at ? time(k.expires_at) : 'never' }),
        el('td', { text: time(k.created_at) + ' by ' + k.created_by }),
        el('td', { text: rotated }),
        actions);
    });
    box.replaceChildren(el('table', { class: 'list' }, el('thead', null, head), el('tbody', null, ...rows)));
    TT.pager($('keys-pager'), keys.length, PER_PAGE, state.page, (p) => { state.page = p; render(); });
  }

  async function mint(ev) {
    ev.preventDefault();
    const err = $('mint-error');
    err.hidden = true;
    const req = { owner: $('mint-owner').value, scopes: { models: null, providers: null, endpoints: null, allow_passthrough: false } };
    const name = $('mint-name').value.trim();
    if (name) req.name = name;
    if (!expiryFrom($('mint-expires').value, $('mint-expires-date').value, req)) {
      err.textContent = 'Pick the day the key expires, or another choice.';
      err.hidden = false;
      return;
    }
    const models = splitList($('mint-models').value);
    const providers = splitList($('mint-providers').value);
    const eps = [...document.querySelectorAll('#mint-form input[name=ep]:checked')].map((c) => c.value);
    if (models.length) req.scopes.models = models;
    if (providers.length) req.scopes.providers = providers;
    const customers = splitList($('mint-customers').value);
    if (customers.length) req.scopes.customers = customers;
    if (eps.length) req.scopes.endpoints = eps;
    try {
      const k = await api('keys', { method: 'POST', body: req });
      showSecret('New key ' + (k.name ? k.name + ' ' : '') + '(' + k.kid + ')', k.key,
        `Owner ${k.owner} · ${k.expires_at ? 'expires ' + time(k.expires_at) : 'never expires'}` + (k.warnings ? ' · ' + k.warnings.join(' ') : ''));
      $('mint-name').value = '';
      TT.notice(`Minted ${k.kid}${k.name ? ' (' + k.name + ')' : ''} for ${k.owner}.`);
      await load();
    } catch (e) {
      err.textContent = e.message;
      err.hidden = false;
    }
  }

  function rotate(k) {
    return TT.ask({
      title: `Rotate ${k.name || k.kid}`,
      text: `A new secret under the same kid: the key keeps its name, owner, scopes, limits and history. The old secret keeps working for the grace period, then stops.`,
      fields: [
        { id: 'grace', label: 'Old secret keeps working for', value: '24h', options: [['24h', '24 hours'], ['1h', '1 hour'], ['168h', '7 days'], ['0s', 'no time: it stops now']] },
        { id: 'expires', label: 'Expiry', value: '', options: [['', k.expires_at ? 'keep (' + time(k.expires_at) + ')' : 'keep (never)'], ['never', 'never'], ['30d', 'in 30 days'], ['90d', 'in 90 days'], ['365d', 'in a year']] },
      ],
      ok: 'Rotate',
      submit: async (v) => {
        const body = { grace: v.grace };
        if (v.expires) body.expires_in = v.expires;
        const r = await api('keys/' + encodeURIComponent(k.kid) + '/rotate', { method: 'POST', body });
        showSecret('Rotated ' + (r.name ? r.name + ' ' : '') + '(' + r.kid + ')', r.key,
          r.previous_secret_until ? 'The previous secret works until ' + time(r.previous_secret_until) + '.' : 'The previous secret stopped working now.');
        TT.notice(`Rotated ${r.kid}.`);
        await load();
        return r;
      },
    });
  }

  function revoke(k) {
    return TT.ask({
      title: `Revoke ${k.name || k.kid}?`,
      text: `Key ${k.kid}${k.name ? ' (' + k.name + ')' : ''} of ${k.owner} is refused by every gateway from its next sync, about a second. A revoked key stays revoked.`,
      ok: 'Revoke', danger: true,
      submit: async () => {
        await api('keys/' + encodeURIComponent(k.kid) + '/revoke', { method: 'POST' });
        TT.notice(`Revoked ${k.kid}.`);
        await load();
        return true;
      },
    });
  }

  TT.page('keys', {
    init() {
      $('mint-form').addEventListener('submit', mint);
      $('mint-expires').addEventListener('change', (ev) => { $('mint-expires-date').hidden = ev.target.value !== 'date'; });
      $('keys-filter').addEventListener('input', () => { state.page = 0; render(); });
      $('keys-state').addEventListener('change', () => { state.page = 0; render(); });
      $('secret-hide').addEventListener('click', () => { $('secret').hidden = true; $('secret-key').textContent = ''; });
      $('secret-copy').addEventListener('click', async () => {
        try {
          await navigator.clipboard.writeText($('secret-key').textContent);
          TT.notice('Copied the key.');
        } catch (e) {
          const r = document.createRange();
          r.selectNodeContents($('secret-key'));
          getSelection().removeAllRanges();
          getSelection().addRange(r);
          TT.notice('Selected the key: copy it with Ctrl+C.');
        }
      });
      $('keys-csv').addEventListener('click', () => state.rows && TT.download('keys-' + new Date().toISOString().slice(0, 10) + '.csv', state.rows));
    },
    async show() {
      try {
        await ownerOptions();
        await load();
      } catch (e) {
        if (e.status !== 401) TT.notice('Could not load the keys: ' + e.message, 'bad');
      }
    },
    reset() {
      state.keys = [];
      $('secret').hidden = true;
      $('secret-key').textContent = '';
      $('mint-form').reset();
      $('mint-expires-date').hidden = true;
    },
  });
})();
