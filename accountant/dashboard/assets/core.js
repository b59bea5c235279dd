// What every page of the dashboard shares: the sign-in, the calls to the
// management API with the token, the pages and their tabs, a dialog for
// a write's details, notices, number formats and CSV downloads.
//
// The token lives in sessionStorage (localStorage when remembered) and
// reaches the accountant only in the Authorization header of the page's
// own fetch calls: no cookie ever carries it, so a page of another site
// cannot make the browser act with it (the accountant reads no cookie).
// Untrusted strings (node ids, key names, model names, limit ids) only
// ever reach the page as text nodes and attribute values.
'use strict';
window.TT = (() => {
  const API = '/tt/api/v1/';
  const state = { token: null, who: null, scope: null, page: null, nodes: null };

  const $ = (id) => document.getElementById(id);
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const k of kids) if (k !== null && k !== undefined && k !== false) e.append(typeof k === 'string' ? document.createTextNode(k) : k);
    return e;
  }
  const SVGNS = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // ---- numbers and words -----------------------------------------------
  function usd(v) {
    v = Number(v);
    if (!v) return '$0';
    const a = Math.abs(v);
    if (a >= 100) return '$' + v.toLocaleString('en-US', { maximumFractionDigits: 0 });
    if (a >= 1) return '$' + v.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });
    if (a >= 0.01) return '$' + v.toFixed(4).replace(/0+$/, '').replace(/\.$/, '');
    return '$' + v.toFixed(9).replace(/0+$/, '').replace(/\.$/, '');
  }
  const int = (n) => Number(n || 0).toLocaleString('en-US');
  function pct(f) { return (f * 100).toFixed(f < 0.1 ? 1 : 0) + '%'; }
  // count says n of a unit in words: "1 request", "2,000 tokens".
  const SINGULAR = { requests: 'request', tokens: 'token', 'concurrent-requests': 'concurrent request' };
  function count(n, unit) {
    n = Number(n || 0);
    return int(n) + ' ' + (n === 1 && SINGULAR[unit] ? SINGULAR[unit] : unit);
  }
  // amount is a limit's figure in its unit: dollars, or a count in words.
  function amount(v, unit) { return unit === 'usd' ? usd(v) : count(v, unit); }
  // thisPeriod says a calendar period of now in words: "today", "this month".
  const thisPeriod = (p) => (p === 'day' ? 'today' : 'this ' + p);
  const time = (s) => (s ? new Date(s).toISOString().slice(0, 16).replace('T', ' ') + ' UTC' : '–');

  // ---- the API ---------------------------------------------------------
  class APIError extends Error {
    constructor(status, type, message) { super(message); this.status = status; this.type = type; }
  }
  // api calls the management API with the token: GET by default, params
  // in the query, body as JSON.
  async function api(path, opts) {
    const o = opts || {};
    const qs = o.params ? '?' + new URLSearchParams(o.params).toString() : '';
    const headers = { Authorization: 'Bearer ' + state.token, Accept: 'application/json' };
    const init = { method: o.method || 'GET', headers, cache: 'no-store', credentials: 'omit' };
    if (o.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(o.body);
    }
    let resp;
    try {
      resp = await fetch(API + path + qs, init);
    } catch (e) {
      throw new APIError(0, 'unreachable', 'cannot reach the accountant (' + e.message + ')');
    }
    let body = null;
    try { body = await resp.json(); } catch (e) { /* not JSON */ }
    if (!resp.ok) {
      const err = body && body.error ? body.error : {};
      const e = new APIError(resp.status, err.type || 'http_' + resp.status, err.message || 'the accountant answered ' + resp.status);
      if (resp.status === 401 && state.token) signOut('The accountant refused the token: ' + e.message);
      throw e;
    }
    if (!body) throw new APIError(resp.status, 'not_json', 'the accountant\'s answer is not JSON');
    return body;
  }

  // nodes lists the nodes the token may manage (config and runtime), once
  // per load unless fresh.
  async function nodes(fresh) {
    if (!state.nodes || fresh) {
      const r = await api('nodes');
      state.nodes = r.nodes.filter((n) => !n.conflict);
    }
    return state.nodes;
  }
  // owns reports whether the token may write below node (the API's rule:
  // a delegated admin writes only below its scope).
  function below(node) {
    return !state.scope || (node !== state.scope && node.startsWith(state.scope + '/'));
  }

  // ---- notices, dialogs, downloads --------------------------------------
  let noticeTimer = null;
  function notice(msg, kind) {
    const n = $('notice');
    n.className = 'notice ' + (kind || 'ok');
    n.textContent = msg;
    n.hidden = false;
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(() => { n.hidden = true; }, 12000);
  }

  // ask shows the dialog with fields (each {id, label, type, value,
  // options, hint, required}) and runs submit(values) on OK; an error
  // it throws stays in the dialog. It resolves to submit's result, or null
  // when cancelled.
  function ask(o) {
    const d = $('dialog');
    $('dialog-title').textContent = o.title;
    const body = $('dialog-body');
    body.replaceChildren();
    if (o.text) body.append(el('p', { text: o.text }));
    for (const f of o.fields || []) {
      const id = 'dlg-' + f.id;
      body.append(el('label', { for: id }, f.label, f.hint ? el('span', { class: 'hint', text: ' ' + f.hint }) : null));
      let input;
      if (f.options) {
        input = el('select', { id, name: f.id });
        for (const [v, label] of f.options) input.append(el('option', { value: v, selected: v === f.value }, label));
      } else {
        input = el('input', { id, name: f.id, type: f.type || 'text', value: f.value || '', required: f.required, spellcheck: 'false', inputmode: f.inputmode });
      }
      body.append(input);
    }
    $('dialog-ok').textContent = o.ok || 'OK';
    $('dialog-ok').className = o.danger ? 'primary danger' : 'primary';
    const err = $('dialog-error');
    err.hidden = true;
    return new Promise((resolve) => {
      const done = (v) => {
        d.close();
        $('dialog-form').onsubmit = null;
        $('dialog-cancel').onclick = null;
        d.oncancel = null;
        resolve(v);
      };
      $('dialog-cancel').onclick = () => done(null);
      d.oncancel = (ev) => { ev.preventDefault(); done(null); };
      $('dialog-form').onsubmit = async (ev) => {
        ev.preventDefault();
        const values = {};
        for (const f of o.fields || []) values[f.id] = $('dlg-' + f.id).value.trim();
        $('dialog-ok').disabled = true;
        try {
          done(await o.submit(values));
        } catch (e) {
          err.textContent = e.message;
          err.hidden = false;
        } finally {
          $('dialog-ok').disabled = false;
        }
      };
      d.showModal();
      const first = body.querySelector('input, select');
      if (first) first.focus(); else $('dialog-ok').focus();
    });
  }

  // csvCell defuses a value a spreadsheet would run as a formula (a
  // name is whatever a client or an admin typed), as the API's CSV does.
  function csvCell(v) {
    let s = v === null || v === undefined ? '' : String(v);
    if (s && '=+-@\t\r'.includes(s[0])) s = "'" + s;
    return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }
  // download saves rows (arrays of cells, the header first) as a CSV
  // file: what the table on screen shows.
  function download(name, rows) {
    const text = rows.map((r) => r.map(csvCell).join(',')).join('\r\n') + '\r\n';
    const a = el('a', { href: URL.createObjectURL(new Blob([text], { type: 'text/csv' })), download: name });
    document.body.append(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
    document.body.dataset.csv = name;
  }

  // pager draws page buttons under a list of n items, per per page.
  function pager(box, n, per, at, go) {
    box.replaceChildren();
    const pages = Math.ceil(n / per);
    if (pages <= 1) return;
    box.append(el('button', { type: 'button', class: 'small', disabled: at === 0, onclick: () => go(at - 1) }, '‹ Previous'),
      el('span', { class: 'hint', text: ` ${at * per + 1}–${Math.min(n, (at + 1) * per)} of ${int(n)} ` }),
      el('button', { type: 'button', class: 'small', disabled: at >= pages - 1, onclick: () => go(at + 1) }, 'Next ›'));
  }

  // ---- pages -------------------------------------------------------------
  const pages = {};
  function page(name, p) { pages[name] = p; }
  function route() {
    if (!state.token) return;
    let name = location.hash.replace(/^#/, '') || 'spend';
    if (!pages[name]) name = 'spend';
    if (state.page && state.page !== name && pages[state.page].hide) pages[state.page].hide();
    state.page = name;
    for (const s of document.querySelectorAll('section.page')) s.hidden = s.dataset.page !== name;
    for (const a of document.querySelectorAll('#tabs a')) {
      if (a.dataset.page === name) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    }
    document.body.dataset.page = name;
    $('footer').hidden = name !== 'spend';
    document.title = a11yTitle(name);
    pages[name].show();
  }
  const a11yTitle = (name) => ({ spend: 'Spend', keys: 'Keys', limits: 'Limits', nodes: 'Nodes', audit: 'Audit log' })[name] + ' · tokentriage';
  // loaded marks the page as drawn, for a test or a screen reader.
  function loaded(name) { if (state.page === name) document.body.dataset.pageState = name + ':ready:' + Date.now(); }

  // ---- sign-in -----------------------------------------------------------
  function storedToken() {
    try { return sessionStorage.getItem('tt.token') || localStorage.getItem('tt.token'); } catch (e) { return null; }
  }
  async function signIn(token, remember) {
    state.token = token;
    let me;
    try {
      me = await api('whoami');
    } catch (e) {
      if (e.status !== 401) signOut('Could not sign in: ' + e.message);
      return;
    }
    state.who = me.who;
    state.scope = me.scope || '';
    try {
      sessionStorage.setItem('tt.token', token);
      if (remember) localStorage.setItem('tt.token', token);
    } catch (e) { /* storage off: the token lives in this page only */ }
    $('signin').hidden = true;
    $('app').hidden = false;
    $('tabs').hidden = false;
    $('signout').hidden = false;
    const w = $('who');
    w.hidden = false;
    w.textContent = state.scope ? 'Delegated admin ' + me.who + ' · ' + state.scope : 'Admin · every node';
    route();
  }
  function signOut(msg) {
    if (state.page && pages[state.page].hide) pages[state.page].hide();
    for (const p of Object.values(pages)) if (p.reset) p.reset();
    state.token = null; state.who = null; state.scope = null; state.page = null; state.nodes = null;
    try { sessionStorage.removeItem('tt.token'); localStorage.removeItem('tt.token'); } catch (e) { /* ignore */ }
    $('app').hidden = true;
    $('tabs').hidden = true;
    $('signout').hidden = true;
    $('who').hidden = true;
    $('notice').hidden = true;
    $('signin').hidden = false;
    const err = $('signin-error');
    err.hidden = !msg;
    err.textContent = msg || '';
    document.body.dataset.state = 'signed_out';
    $('token').value = '';
    $('token').focus();
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('signin-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const t = $('token').value.trim();
      if (t) signIn(t, $('remember').checked);
    });
    $('signout').addEventListener('click', () => signOut(''));
    window.addEventListener('hashchange', route);
    // A tab of the page shown draws it again (a write elsewhere, a rollout).
    $('tabs').addEventListener('click', (ev) => {
      const a = ev.target.closest('a[data-page]');
      if (a && location.hash === '#' + a.dataset.page) { ev.preventDefault(); route(); }
    });
    for (const p of Object.values(pages)) if (p.init) p.init();
    const t = storedToken();
    if (t) signIn(t, false); else signOut('');
  });

  return { state, $, el, svg, usd, int, pct, count, amount, thisPeriod, time, APIError, api, nodes, below, notice, ask, download, pager, page, loaded };
})();
