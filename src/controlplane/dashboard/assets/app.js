// Exo dashboard: the browser side (docs/dashboard.md is the contract).
// Plain script, no build step. Every string from a cluster or the server goes
// into the page through textContent / DOM APIs, never as HTML.
'use strict';

(() => {
  // ---------------------------------------------------------------- helpers

  const $ = (sel, root = document) => root.querySelector(sel);

  // el('td', {class: 'x', dataset: {state: 'done'}, title: 't'}, 'text', node)
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    if (attrs) {
      for (const [key, value] of Object.entries(attrs)) {
        if (value === undefined || value === null || value === false) continue;
        if (key === 'style') throw new Error('no inline styles (CSP): use a class');
        if (key === 'class') node.className = value;
        else if (key === 'dataset') {
          for (const [k, v] of Object.entries(value)) if (v !== undefined && v !== null) node.dataset[k] = String(v);
        }
        else if (key === 'text') node.textContent = value;
        else if (key === 'hidden') node.hidden = Boolean(value);
        else node.setAttribute(key, value === true ? '' : String(value));
      }
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children) {
      if (child === undefined || child === null || child === false) continue;
      if (Array.isArray(child)) append(node, child);
      else node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.firstChild.remove();
    return node;
  }

  const enc = encodeURIComponent;

  function csrfToken() {
    const meta = document.querySelector('meta[name="exo-csrf"]');
    return meta ? meta.content : '';
  }

  class HttpError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  // The text of an error answer: {"error": ...} when JSON, else the body.
  async function errorText(resp) {
    const text = await resp.text().catch(() => '');
    try {
      const body = JSON.parse(text);
      if (body && typeof body.error === 'string') return body.error;
    } catch (_) { /* not JSON */ }
    return text.trim() || `${resp.status} ${resp.statusText}`;
  }

  // The login page sends the browser back here (`next`, a local path).
  function toLogin() {
    if (location.pathname !== '/login') {
      location.assign(`/login?next=${enc(location.pathname + location.search)}`);
    }
  }

  async function request(path, options = {}) {
    const resp = await fetch(path, { credentials: 'same-origin', cache: 'no-store', ...options });
    if (resp.status === 401) {
      toLogin();
      throw new HttpError(401, 'not logged in');
    }
    return resp;
  }

  async function getJSON(path) {
    const resp = await request(path, { headers: { Accept: 'application/json' } });
    if (!resp.ok) throw new HttpError(resp.status, await errorText(resp));
    return resp.json();
  }

  // A state-changing request: CSRF header, JSON body. Resolves to
  // {ok, status, body, error}; body is the parsed JSON when there is one.
  async function postJSON(path, payload) {
    const resp = await request(path, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Accept: 'application/json',
        'X-CSRF-Token': csrfToken(),
      },
      body: payload === undefined ? '{}' : JSON.stringify(payload),
    });
    const text = await resp.text().catch(() => '');
    let body = null;
    const json = (resp.headers.get('Content-Type') || '').includes('json');
    if (json) {
      try { body = JSON.parse(text); } catch (_) { body = null; }
    }
    let error = null;
    if (!resp.ok || (body && body.ok === false)) {
      error = (body && typeof body.error === 'string' && body.error) ||
        text.trim() || `${resp.status} ${resp.statusText}`;
    }
    return { ok: resp.ok && !error, status: resp.status, body, error };
  }

  function setStatus(text, kind) {
    const box = $('#action-status');
    if (!box) return;
    box.className = kind || '';
    box.textContent = text;
  }

  // ------------------------------------------------------------ formatting

  function formatAge(ms) {
    if (ms === null || ms === undefined || !Number.isFinite(ms)) return 'never';
    if (ms < 0) ms = 0;
    const s = Math.floor(ms / 1000);
    if (s < 60) return `${s} s ago`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m} min ago`;
    const h = Math.floor(m / 60);
    if (h < 48) return `${h} h ${m % 60} min ago`;
    return `${Math.floor(h / 24)} days ago`;
  }

  function pad(n) { return String(n).padStart(2, '0'); }

  function formatTime(value) {
    if (value === null || value === undefined || value === '') return '';
    const d = new Date(value);
    if (Number.isNaN(d.getTime())) return String(value);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
      `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }

  function timeEl(value, cls) {
    if (value === null || value === undefined || value === '') return el('span', { class: cls ? `${cls} muted` : 'muted' }, '—');
    const d = new Date(value);
    const iso = Number.isNaN(d.getTime()) ? String(value) : d.toISOString();
    return el('time', { class: cls, datetime: iso, title: iso }, formatTime(value));
  }

  function formatBytes(n) {
    if (typeof n !== 'number' || !Number.isFinite(n)) return '?';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let i = 0;
    while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
    return `${i === 0 ? n : n.toFixed(n < 10 ? 2 : 1)} ${units[i]}`;
  }

  const str = (v) => (v === null || v === undefined ? '' : String(v));
  const dash = (v) => (v === null || v === undefined || v === '' ? '—' : String(v));

  // ----------------------------------------------------------------- theme

  const THEME_KEY = 'exo-theme';

  function storedTheme() {
    try { return localStorage.getItem(THEME_KEY); } catch (_) { return null; }
  }

  function effectiveDark() {
    const t = document.documentElement.dataset.theme;
    if (t === 'dark') return true;
    if (t === 'light') return false;
    return window.matchMedia('(prefers-color-scheme: dark)').matches;
  }

  function applyTheme() {
    const t = storedTheme();
    if (t === 'dark' || t === 'light') document.documentElement.dataset.theme = t;
    else delete document.documentElement.dataset.theme;
    const button = $('#theme');
    if (button) {
      const dark = effectiveDark();
      button.setAttribute('aria-pressed', dark ? 'true' : 'false');
      button.textContent = dark ? 'Light mode' : 'Dark mode';
      button.title = 'Toggle dark mode (the choice is kept in this browser)';
    }
  }

  function setupTheme() {
    applyTheme();
    const button = $('#theme');
    if (button) {
      button.addEventListener('click', () => {
        const next = effectiveDark() ? 'light' : 'dark';
        try { localStorage.setItem(THEME_KEY, next); } catch (_) { /* private mode */ }
        applyTheme();
      });
    }
    window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', applyTheme);
  }

  // ---------------------------------------------------------------- routing

  function route(pathname) {
    if (pathname === '/' || pathname === '') return { page: 'overview' };
    if (pathname === '/login') return { page: 'login' };
    const m = pathname.match(/^\/deployments\/([^/]+)(?:\/(waves|storage|audit|shell))?\/?$/);
    if (!m) return { page: 'notfound' };
    let name;
    try { name = decodeURIComponent(m[1]); } catch (_) { return { page: 'notfound' }; }
    return { page: m[2] || 'deployment', deployment: name };
  }

  function buildNav(r) {
    const nav = $('#nav');
    if (!nav) return;
    clear(nav);
    const link = (href, text, current) =>
      el('a', { href, 'aria-current': current ? 'page' : null }, text);
    nav.append(link('/', 'Fleet', r.page === 'overview'));
    if (!r.deployment) return;
    const base = `/deployments/${enc(r.deployment)}`;
    nav.append(
      el('span', { class: 'nav-sep', 'aria-hidden': 'true' }, '›'),
      el('span', { class: 'nav-deployment' }, r.deployment),
      link(base, 'Workloads', r.page === 'deployment'),
      link(`${base}/waves`, 'Waves', r.page === 'waves'),
      el('span', { class: 'nav-group' }, 'Infrastructure:'),
      link(`${base}/storage`, 'Storage', r.page === 'storage'),
      link(`${base}/audit`, 'Audit', r.page === 'audit'),
    );
    if (r.page === 'shell') {
      nav.append(link(location.pathname + location.search, 'Shell', true));
    }
  }

  // Only a session (cookie) has a CSRF token: without one there is nothing
  // to log out of (open dashboard, or a Bearer client).
  function setupLogout() {
    const button = $('#logout');
    if (!button) return;
    if (!csrfToken()) { button.hidden = true; return; }
    button.addEventListener('click', async () => {
      button.disabled = true;
      try {
        const res = await postJSON('/logout');
        if (!res.ok && res.status !== 401) {
          setStatus(`Log out failed: ${res.error}`, 'failed');
          button.disabled = false;
          return;
        }
      } catch (err) {
        if (err.status !== 401) {
          setStatus(`Log out failed: ${err.message}`, 'failed');
          button.disabled = false;
          return;
        }
      }
      location.assign('/login');
    });
  }

  // ------------------------------------------------------------ live stream

  // Opens the events stream; handlers: {event name: fn(data)}, plus
  // onResync() called on every reconnect and on `resync`.
  function live(deployment, handlers, onResync) {
    const url = '/api/v1/events' + (deployment ? `?deployment=${enc(deployment)}` : '');
    const body = document.body;
    let hellos = 0;
    let retry = 0;
    let source = null;
    let leaving = false;

    const setLive = (state) => {
      body.dataset.live = state;
      const text = $('#live .live-text');
      if (text) text.textContent = state === 'open' ? 'live' : state;
    };

    const open = () => {
      setLive('connecting');
      source = new EventSource(url);
      source.addEventListener('open', () => { retry = 0; setLive('open'); });
      source.addEventListener('error', () => {
        if (leaving) return;
        if (source.readyState === EventSource.CLOSED) {
          // The browser gave up (an HTTP error answer): see whether the
          // session ended, else open a new stream after a back-off.
          setLive('closed');
          getJSON('/api/v1/deployments').catch(() => {});
          retry = Math.min(retry + 1, 6);
          setTimeout(open, 1000 * 2 ** retry);
        } else {
          setLive('connecting');
        }
      });
      source.addEventListener('hello', () => {
        setLive('open');
        hellos += 1;
        if (hellos > 1) onResync();
      });
      source.addEventListener('resync', () => onResync());
      // A heartbeat is a frame the server just received: the age restarts.
      source.addEventListener('heartbeat', (ev) => {
        let data;
        try { data = JSON.parse(ev.data); } catch (_) { return; }
        if (data && typeof data.deployment === 'string') {
          frameSeen(data.deployment);
          tickHeartbeats();
        }
      });
      for (const [name, fn] of Object.entries(handlers)) {
        source.addEventListener(name, (ev) => {
          let data;
          try { data = JSON.parse(ev.data); } catch (_) { return; }
          fn(data);
        });
      }
    };
    open();
    const leave = () => { leaving = true; if (source) source.close(); };
    window.addEventListener('pagehide', leave);
    window.addEventListener('beforeunload', () => { leaving = true; });
  }

  // --------------------------------------------------------- page skeleton

  function pageHead(title, sub, ...extra) {
    return el('div', { class: 'page-head' },
      el('div', null, el('h1', null, title), sub ? el('p', { class: 'sub' }, sub) : null),
      extra);
  }

  // A table with a header row: headers are texts or [text, class].
  function dataTable(id, headers) {
    const tbody = el('tbody');
    const cells = headers.map((h) => {
      const [text, cls] = Array.isArray(h) ? h : [h];
      return el('th', { scope: 'col', class: cls }, text);
    });
    const table = el('table', { id }, el('thead', null, el('tr', null, cells)), tbody);
    return { table, tbody };
  }

  function showError(container, err) {
    clear(container).append(el('p', { class: 'error', role: 'alert' }, `Could not load: ${err.message}`));
  }

  // Heartbeat ages: the server's clock is the deployment's last frame time
  // plus its age at the time of the answer; keep the skew to ours.
  const heartbeats = new Map(); // deployment name -> {atMs, skew}

  function noteHeartbeat(d) {
    if (typeof d.last_frame_at_ms === 'number') {
      const serverNow = typeof d.last_frame_age_ms === 'number'
        ? d.last_frame_at_ms + d.last_frame_age_ms : Date.now();
      heartbeats.set(d.name, { atMs: d.last_frame_at_ms, skew: Date.now() - serverNow });
    } else if (typeof d.last_frame_age_ms === 'number') {
      heartbeats.set(d.name, { atMs: Date.now() - d.last_frame_age_ms, skew: 0 });
    } else {
      heartbeats.set(d.name, null);
    }
  }

  // A delta or a `heartbeat` event is a frame the server just received:
  // the age restarts.
  function frameSeen(name) {
    const h = heartbeats.get(name);
    const skew = h ? h.skew : 0;
    heartbeats.set(name, { atMs: Date.now() - skew, skew });
  }

  function heartbeatText(name) {
    const h = heartbeats.get(name);
    if (!h) return 'never';
    return formatAge(Date.now() - h.skew - h.atMs);
  }

  function tickHeartbeats() {
    for (const node of document.querySelectorAll('.heartbeat[data-for]')) {
      node.textContent = heartbeatText(node.dataset.for);
    }
  }

  function stateBadge(state) {
    const s = ['online', 'degraded', 'offline'].includes(state) ? state : 'offline';
    return el('span', { class: 'state', dataset: { state: s } }, s);
  }

  // ------------------------------------------------------------- overview

  function pageOverview(main) {
    const rows = new Map();
    const activeAlerts = new Map(); // name -> [active alert]
    const { table, tbody } = dataTable('deployments', [
      'Deployment', 'State', 'Last heartbeat', 'Operator version', 'Capabilities', 'Active alerts',
    ]);
    const count = el('p', { class: 'sub' }, 'Loading…');
    clear(main).append(pageHead('Fleet', null, count), el('div', { class: 'card table-wrap' }, table));

    const renderAlerts = (cell, d) => {
      clear(cell);
      const n = typeof d.active_alerts === 'number' ? d.active_alerts : 0;
      cell.append(el('a', { class: 'alert-count', dataset: { count: String(n) }, href: `/api/v1/deployments/${enc(d.name)}/alerts/active` },
        n === 1 ? '1 active' : `${n} active`));
      const list = activeAlerts.get(d.name);
      if (n > 0 && list && list.length) {
        const ul = el('ul');
        for (const a of list.slice(0, 3)) {
          ul.append(el('li', { title: str(a.message) },
            el('span', { class: `badge sev-${str(a.severity)}` }, dash(a.severity)), ' ',
            str(a.reason), a.object ? el('span', { class: 'muted' }, ` ${a.namespace ? `${a.namespace}/` : ''}${a.object}`) : null));
        }
        if (list.length > 3) ul.append(el('li', { class: 'muted' }, `and ${list.length - 3} more`));
        cell.append(ul);
      }
    };

    const fetchAlerts = async (d) => {
      if (!d.active_alerts) { activeAlerts.delete(d.name); return; }
      try {
        const res = await getJSON(`/api/v1/deployments/${enc(d.name)}/alerts/active`);
        activeAlerts.set(d.name, Array.isArray(res.active) ? res.active : []);
        const row = rows.get(d.name);
        if (row) renderAlerts(row.alerts, row.d);
      } catch (_) { /* the count stays */ }
    };

    const upsert = (d) => {
      if (!d || typeof d.name !== 'string') return;
      noteHeartbeat(d);
      let row = rows.get(d.name);
      if (!row) {
        const tr = el('tr', { dataset: { deployment: d.name } });
        row = {
          tr,
          name: el('th', { scope: 'row' }, el('a', { href: `/deployments/${enc(d.name)}` }, d.name)),
          state: el('td'),
          heartbeat: el('td', { class: 'heartbeat nowrap', dataset: { for: d.name } }),
          version: el('td', { class: 'version' }),
          capabilities: el('td', { class: 'capabilities' }),
          alerts: el('td', { class: 'alerts' }),
        };
        tr.append(row.name, row.state, row.heartbeat, row.version, row.capabilities, row.alerts);
        // keep rows sorted by name, without moving existing ones
        const after = [...rows.keys()].filter((k) => k > d.name).sort()[0];
        if (after) tbody.insertBefore(tr, rows.get(after).tr); else tbody.append(tr);
        rows.set(d.name, row);
      }
      row.d = d;
      clear(row.state).append(stateBadge(d.state));
      row.state.title = d.connected ? 'connected' : `not connected${d.last_close ? ` (last close: ${d.last_close})` : ''}`;
      row.heartbeat.textContent = heartbeatText(d.name);
      row.version.textContent = dash(d.agent_version);
      clear(row.capabilities);
      const caps = Array.isArray(d.capabilities) ? d.capabilities : [];
      if (caps.length) caps.forEach((c) => row.capabilities.append(el('span', { class: 'cap' }, str(c))));
      else row.capabilities.append(el('span', { class: 'muted' }, '—'));
      renderAlerts(row.alerts, d);
      count.textContent = rows.size === 1 ? '1 deployment' : `${rows.size} deployments`;
    };

    const load = async () => {
      try {
        const res = await getJSON('/api/v1/deployments');
        const list = Array.isArray(res.deployments) ? res.deployments : [];
        for (const d of list) upsert(d);
        if (!list.length && !rows.size) {
          count.textContent = 'No deployments yet: exo control-plane deployment create NAME';
        }
        await Promise.all(list.map(fetchAlerts));
      } catch (err) {
        if (err.status !== 401) count.textContent = `Could not load the deployments: ${err.message}`;
      }
    };

    load();
    setInterval(tickHeartbeats, 1000);
    live(null, {
      deployment: (d) => {
        const before = rows.get(d.name);
        const changed = !before || before.d.active_alerts !== d.active_alerts;
        upsert(d);
        if (changed) fetchAlerts(d);
      },
      alerts: (a) => { const row = rows.get(a.deployment); if (row) fetchAlerts(row.d); },
      resource: (ev) => { if (rows.has(ev.deployment)) frameSeen(ev.deployment); },
    }, load);
  }

  // ---------------------------------------------------- resources (shared)

  const KIND_ORDER = ['Agent', 'Tool', 'AgentFS', 'Pod', 'Rollout'];
  const resKey = (r) => `${r.kind}\u0000${r.namespace}\u0000${r.name}`;
  function compareRes(a, b) {
    const ka = KIND_ORDER.indexOf(a.kind); const kb = KIND_ORDER.indexOf(b.kind);
    const ia = ka < 0 ? 99 : ka; const ib = kb < 0 ? 99 : kb;
    if (ia !== ib) return ia - ib;
    if (a.kind !== b.kind) return a.kind < b.kind ? -1 : 1;
    if (a.namespace !== b.namespace) return a.namespace < b.namespace ? -1 : 1;
    if (a.name !== b.name) return a.name < b.name ? -1 : 1;
    return 0;
  }

  // A live set of one deployment's resources: initial fetch, deltas,
  // refetch on `resources`/resync. onChange(changedKeys|null) where null
  // means "everything".
  function resourceSet(deployment, onChange, extra = {}) {
    const map = new Map();
    const load = async () => {
      const res = await getJSON(`/api/v1/deployments/${enc(deployment)}/resources`);
      map.clear();
      for (const r of Array.isArray(res.resources) ? res.resources : []) map.set(resKey(r), r);
      onChange(null);
    };
    const handlers = {
      resource: (ev) => {
        if (ev.deployment !== deployment || !ev.resource) return;
        frameSeen(deployment);
        const key = resKey(ev.resource);
        if (ev.op === 'remove') map.delete(key); else map.set(key, ev.resource);
        onChange([key]);
      },
      resources: (ev) => { if (ev.deployment === deployment) load().catch(() => {}); },
      ...extra.handlers,
    };
    const reload = () => {
      load().catch((err) => { if (extra.onError) extra.onError(err); });
      if (extra.onResync) extra.onResync();
    };
    return { map, load, handlers, reload };
  }

  function deploymentSummary(deployment) {
    const box = el('p', { class: 'summary' }, el('span', { class: 'muted' }, 'Loading…'));
    const render = (d) => {
      if (!d || d.name !== deployment) return;
      noteHeartbeat(d);
      clear(box).append(
        stateBadge(d.state),
        el('span', null, 'heartbeat ', el('strong', { class: 'heartbeat', dataset: { for: d.name } }, heartbeatText(d.name))),
        el('span', null, 'operator ', el('strong', null, dash(d.agent_version))),
        el('span', null, 'resources ', el('strong', null, dash(d.resources))),
        el('span', null, 'active alerts ', el('strong', null, dash(d.active_alerts))),
      );
    };
    const load = () => getJSON(`/api/v1/deployments/${enc(deployment)}`).then(render);
    setInterval(tickHeartbeats, 1000);
    return { box, render, load };
  }

  // ----------------------------------------------------------- deployment

  function resourceDetail(r) {
    const spec = r.spec || {};
    const status = r.status || {};
    const parts = [];
    switch (r.kind) {
      case 'Agent':
        if (spec.paused) parts.push('paused');
        if (status.podName) parts.push(`pod ${status.podName}`);
        if (spec.runtime && spec.runtime.image) parts.push(spec.runtime.image);
        break;
      case 'Tool':
        if (spec.enabled === false) parts.push('disabled');
        if (spec.port) parts.push(`port ${spec.port}`);
        if (status.podName) parts.push(`pod ${status.podName}`);
        break;
      case 'AgentFS':
        if (spec.size) parts.push(`size ${spec.size}${spec.maxSize ? ` (max ${spec.maxSize})` : ''}`);
        if (Array.isArray(status.mountedBy) && status.mountedBy.length) parts.push(`mounted by ${status.mountedBy.join(', ')}`);
        break;
      case 'Pod':
        if (spec.nodeName) parts.push(`node ${spec.nodeName}`);
        break;
      case 'Rollout':
        if (spec.release) parts.push(`release ${spec.release}`);
        if (spec.wave) parts.push(`wave ${spec.wave}`);
        if (status.currentStep) parts.push(`step ${status.currentStep}`);
        break;
      default:
        break;
    }
    if (status.message) parts.push(status.message);
    return parts.join(' · ');
  }

  function resourcePhase(r) {
    return str(r.phase || (r.status && r.status.phase));
  }

  function pageDeployment(main, deployment) {
    const summary = deploymentSummary(deployment);
    const filter = el('input', { id: 'filter', type: 'search', placeholder: 'kind, namespace, name or phase', autocomplete: 'off' });
    const shown = el('span', { class: 'count', 'aria-live': 'polite' });
    const { table, tbody } = dataTable('resources', [
      'Kind', 'Namespace', 'Name', 'Phase', 'Details', 'Actions',
    ]);
    const empty = el('p', { class: 'empty', hidden: true }, 'No resources in this deployment’s view yet.');
    clear(main).append(
      pageHead(deployment, null),
      el('div', { class: 'toolbar' }, el('label', { for: 'filter' }, 'Filter'), filter, shown),
      el('div', { class: 'card table-wrap' }, table, empty));
    $('.page-head', main).append(summary.box);

    const rows = new Map(); // key -> {tr, phase, detail, r}

    const matches = (r, q) => {
      if (!q) return true;
      return [r.kind, r.namespace, r.name, resourcePhase(r)].some((v) => str(v).toLowerCase().includes(q));
    };

    const applyFilter = () => {
      const q = filter.value.trim().toLowerCase();
      let n = 0;
      for (const row of rows.values()) {
        const ok = matches(row.r, q);
        row.tr.hidden = !ok;
        if (ok) n += 1;
      }
      shown.textContent = q ? `${n} of ${rows.size} shown` : `${rows.size} resources`;
      empty.hidden = rows.size !== 0;
    };

    const podControl = async (r, action, buttons) => {
      const who = `${r.namespace}/${r.name}`;
      buttons.forEach((b) => { b.disabled = true; });
      setStatus(`${action} ${who}: sending…`, 'pending');
      try {
        const res = await postJSON(`/api/v1/deployments/${enc(deployment)}/pod-control`,
          { action, namespace: r.namespace, agent: r.name, actor: 'dashboard' });
        if (res.ok) setStatus(`${action} ${who}: done${res.body && res.body.id ? ` (request ${res.body.id})` : ''}`, 'ok');
        else setStatus(`${action} ${who} failed (${res.status}): ${res.error}`, 'failed');
      } catch (err) {
        if (err.status !== 401) setStatus(`${action} ${who} failed: ${err.message}`, 'failed');
      } finally {
        buttons.forEach((b) => { b.disabled = false; });
      }
    };

    const makeRow = (r) => {
      const tr = el('tr', { dataset: { kind: r.kind, namespace: r.namespace, name: r.name } });
      const phase = el('span', { class: 'phase' });
      const detail = el('td', { class: 'detail' });
      const actions = el('td', { class: 'actions' });
      if (r.kind === 'Agent') {
        const buttons = ['restart', 'pause', 'resume'].map((action) =>
          el('button', { type: 'button', class: 'small', dataset: { action }, 'aria-label': `${action} ${r.namespace}/${r.name}` },
            action[0].toUpperCase() + action.slice(1)));
        buttons.forEach((b) => b.addEventListener('click', () => podControl(rows.get(resKey(r)).r, b.dataset.action, buttons)));
        actions.append(...buttons,
          el('a', {
            class: 'shell',
            href: `/deployments/${enc(deployment)}/shell?namespace=${enc(r.namespace)}&agent=${enc(r.name)}`,
            'aria-label': `shell on ${r.namespace}/${r.name}`,
          }, 'Shell'));
      }
      tr.append(
        el('td', null, el('span', { class: 'kind' }, r.kind)),
        el('td', null, r.namespace),
        el('th', { scope: 'row' }, r.name),
        el('td', null, phase),
        detail,
        actions);
      return { tr, phase, detail, r };
    };

    const update = (row, r) => {
      row.r = r;
      const p = resourcePhase(r);
      row.phase.textContent = p || '—';
      row.phase.dataset.phase = p;
      row.detail.textContent = resourceDetail(r);
      row.detail.title = row.detail.textContent;
    };

    const set = resourceSet(deployment, (keys) => {
      const all = keys === null;
      const wanted = all ? [...set.map.keys()] : keys;
      if (all) {
        for (const [key, row] of rows) {
          if (!set.map.has(key)) { row.tr.remove(); rows.delete(key); }
        }
      }
      for (const key of wanted) {
        const r = set.map.get(key);
        let row = rows.get(key);
        if (!r) { if (row) { row.tr.remove(); rows.delete(key); } continue; }
        if (!row) {
          row = makeRow(r);
          let before = null;
          for (const other of rows.values()) {
            if (compareRes(other.r, r) > 0 && (!before || compareRes(other.r, before.r) < 0)) before = other;
          }
          tbody.insertBefore(row.tr, before ? before.tr : null);
          rows.set(key, row);
        }
        update(row, r);
      }
      applyFilter();
    }, {
      handlers: { deployment: summary.render },
      onResync: () => summary.load().catch(() => {}),
      onError: (err) => setStatus(`Could not load the resources: ${err.message}`, 'failed'),
    });

    filter.addEventListener('input', applyFilter);
    summary.load().catch((err) => { if (err.status !== 401) showError(main, err); });
    set.load().catch((err) => { if (err.status !== 401) setStatus(`Could not load the resources: ${err.message}`, 'failed'); });
    live(deployment, set.handlers, set.reload);
  }

  // ----------------------------------------------------------------- waves

  const WAVE_ORDER = ['canary', 'low-risk', 'fleet'];
  function compareWave(a, b) {
    const ia = WAVE_ORDER.indexOf(a); const ib = WAVE_ORDER.indexOf(b);
    if (ia >= 0 || ib >= 0) return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib);
    return a < b ? -1 : a > b ? 1 : 0;
  }

  const STEP_STATES = ['done', 'running', 'pending', 'waiting', 'failed'];

  // A step's label on two lines, the verb shortened: `verified/agent-runtime`
  // -> "verify" over "agent-runtime", `pods-rolled/broker` -> "roll" over
  // "broker", `configmaps-published` -> "publish" over "configmaps"; the
  // full name stays in data-step and the title.
  const VERB_SHORT = {
    'pods-rolled': 'roll', repointed: 'repoint', verified: 'verify', published: 'publish',
    isolated: 'isolate', projected: 'project', pruned: 'prune',
  };
  function stepLabel(name) {
    const n = str(name);
    const slash = n.indexOf('/');
    if (slash > 0) {
      const verb = n.slice(0, slash);
      return { verb: VERB_SHORT[verb] || verb, target: n.slice(slash + 1) };
    }
    const hyphen = n.lastIndexOf('-');
    if (hyphen > 0) {
      const verb = n.slice(hyphen + 1);
      return { verb: VERB_SHORT[verb] || verb, target: n.slice(0, hyphen) };
    }
    return { verb: '', target: n };
  }

  function rolloutIsCurrent(r) {
    const status = r.status || {};
    const spec = r.spec || {};
    if (!r.status) return false;
    return r.generation !== undefined && r.generation !== null &&
      status.observedGeneration === r.generation &&
      typeof status.desiredHash === 'string' && status.desiredHash === spec.desiredHash;
  }

  function stepCell(step, index) {
    const rawState = str(step.state).toLowerCase();
    const state = STEP_STATES.includes(rawState) ? rawState : 'pending';
    const { verb, target } = stepLabel(step.name);
    const lines = [`${str(step.name)}: ${state}`];
    if (step.owner) lines.push(`owner: ${step.owner}`);
    if (step.startedAt) lines.push(`started: ${formatTime(step.startedAt)}`);
    if (step.finishedAt) lines.push(`finished: ${formatTime(step.finishedAt)}`);
    if (step.message) lines.push(str(step.message));
    const td = el('td', {
      class: index === 0 ? 'step first' : 'step',
      dataset: { step: str(step.name), state },
      title: state === 'failed' && step.message ? str(step.message) : lines.join('\n'),
    },
    el('div', { class: 'chip' },
      verb ? el('span', { class: 'verb' }, verb) : null,
      el('span', { class: 'target' }, target),
      el('span', { class: 'state-label' }, ` ${state}`)));
    if (state === 'failed' && step.message) {
      td.append(el('span', { class: 'message' }, str(step.message)));
    } else if (state === 'waiting' && step.message) {
      td.dataset.hint = str(step.message);
    }
    return td;
  }

  function pageWaves(main, deployment) {
    const summary = deploymentSummary(deployment);
    const body = el('div', { id: 'waves' }, el('p', { class: 'muted' }, 'Loading…'));
    const legend = el('ul', { class: 'legend', 'aria-label': 'Legend' },
      STEP_STATES.map((s) => el('li', null, el('span', { class: 'swatch', dataset: { state: s }, 'aria-hidden': 'true' }), s)),
      el('li', null, el('span', { class: 'swatch stale', 'aria-hidden': 'true' }), 'stale (status computed for an older spec)'));
    clear(main).append(pageHead(`Waves · ${deployment}`, 'One row per tenant; one cell per saga step, in the tenant’s order.'), legend, body);
    $('.page-head', main).append(summary.box);

    const render = () => {
      const rollouts = [...set.map.values()].filter((r) => r.kind === 'Rollout');
      clear(body);
      if (!rollouts.length) {
        body.append(el('p', { class: 'empty card' }, 'No Rollout resources in this deployment’s view.'));
        return;
      }
      const waves = new Map();
      for (const r of rollouts) {
        const wave = str((r.spec && r.spec.wave) || '(none)');
        if (!waves.has(wave)) waves.set(wave, []);
        waves.get(wave).push(r);
      }
      [...waves.keys()].sort(compareWave).forEach((wave, waveIndex) => {
        const list = waves.get(wave).sort((a, b) => {
          const ta = str((a.spec && a.spec.tenant) || a.namespace);
          const tb = str((b.spec && b.spec.tenant) || b.namespace);
          return ta < tb ? -1 : ta > tb ? 1 : 0;
        });
        const maxSteps = Math.max(1, ...list.map((r) => ((r.status && Array.isArray(r.status.steps)) ? r.status.steps.length : 0)));
        const tbody = el('tbody');
        const verified = list.filter((r) => rolloutIsCurrent(r) && r.status.phase === 'Verified').length;
        for (const r of list) tbody.append(tenantRow(r, maxSteps));
        body.append(el('section', { class: 'wave card', dataset: { wave }, 'aria-labelledby': `wave-${waveIndex}` },
          el('div', { class: 'wave-head' },
            el('h2', { id: `wave-${waveIndex}` }, wave),
            el('span', { class: 'muted' }, `${list.length} tenant${list.length === 1 ? '' : 's'}, ${verified} verified`)),
          el('div', { class: 'table-wrap' },
            el('table', null,
              el('thead', null, el('tr', null,
                el('th', { scope: 'col' }, 'Tenant'),
                el('th', { scope: 'col' }, 'Release'),
                el('th', { scope: 'col' }, 'Verified'),
                el('th', { scope: 'col', colspan: String(maxSteps) }, 'Saga steps'))),
              tbody))));
      });
    };

    const tenantRow = (r, maxSteps) => {
      const spec = r.spec || {};
      const status = r.status || {};
      const tenant = str(spec.tenant || r.namespace);
      const current = rolloutIsCurrent(r);
      const tr = el('tr', { class: 'tenant', dataset: { tenant, stale: current ? null : 'true' } });
      const phaseText = current ? dash(status.phase) : 'stale';
      const headTitle = [status.message, status.currentStep ? `step: ${status.currentStep}` : null].filter(Boolean).join('\n');
      tr.append(el('th', { scope: 'row', title: headTitle || null },
        tenant,
        el('span', { class: 'tenant-phase' },
          current ? phaseText : el('span', { class: 'badge stale', title: staleReason(r) }, 'stale'))));
      const commit = str(spec.commit);
      const releaseTitle = status.release && status.release !== spec.release ? `status is for release ${status.release}` : null;
      const liveCheck = status.lastLiveCheck;
      const verifiedTd = el('td', { class: 'verified-cell' }, verifiedEl(status.verifiedAt));
      if (liveCheck) {
        verifiedTd.title = `last live check ${formatTime(liveCheck.at)}: ${liveCheck.ok ? 'ok' : 'NOT ok'}` +
          `${typeof liveCheck.pods === 'number' ? `, ${liveCheck.pods} pods` : ''}${liveCheck.message ? ` — ${liveCheck.message}` : ''}`;
      }
      tr.append(
        el('td', { class: 'release-cell' },
          el('span', { class: 'release', title: releaseTitle }, dash(spec.release)),
          el('span', { class: 'commit', title: commit || null }, commit ? commit.slice(0, 7) : '—')),
        verifiedTd);
      const steps = Array.isArray(status.steps) ? status.steps : [];
      steps.forEach((s, i) => tr.append(stepCell(s, i)));
      if (steps.length < maxSteps) {
        tr.append(el('td', { class: 'pipeline-gap muted', colspan: String(maxSteps - steps.length) }, steps.length ? '' : 'no steps yet'));
      }
      return tr;
    };

    // `MM-DD HH:MM` (the year and seconds in the title), so the column
    // stays narrow
    const verifiedEl = (value) => {
      const t = timeEl(value, 'verified-at');
      const text = t.textContent;
      if (t.localName === 'time' && /^\d{4}-\d\d-\d\d \d\d:\d\d/.test(text)) {
        t.textContent = `${text.slice(5, 10)} ${text.slice(11, 16)}`;
        t.title = `${text} (${t.title})`;
      }
      return t;
    };

    const staleReason = (r) => {
      const status = r.status || {};
      const spec = r.spec || {};
      if (!r.status) return 'no status yet';
      if (status.observedGeneration !== r.generation) {
        return `status is for generation ${dash(status.observedGeneration)}, spec is generation ${dash(r.generation)}`;
      }
      return 'status is for another desired hash than the spec';
    };

    const set = resourceSet(deployment, render, {
      handlers: { deployment: summary.render },
      onResync: () => summary.load().catch(() => {}),
    });
    summary.load().catch(() => {});
    set.load().catch((err) => { if (err.status !== 401) showError(body, err); });
    live(deployment, set.handlers, set.reload);
  }

  // --------------------------------------------------------------- storage

  function pageStorage(main, deployment) {
    const summary = deploymentSummary(deployment);
    const { table, tbody } = dataTable('storage', [
      'Namespace', 'AgentFS', 'Phase', 'Size (max)', ['Requested', 'num'], ['Provisioned', 'num'], 'PVC', 'Mounted by', 'Usage',
    ]);
    const empty = el('p', { class: 'empty', hidden: true }, 'No AgentFS in this deployment’s view.');
    clear(main).append(
      pageHead(`Infrastructure › Storage · ${deployment}`, 'Every AgentFS: capacity asked for and provisioned, its PVC, who mounts it; real usage on request (df through the operator).'),
      el('div', { class: 'card table-wrap' }, table, empty));
    $('.page-head', main).append(summary.box);

    const rows = new Map();
    const usage = new Map(); // key -> last usage result (kept across re-renders)

    const renderUsage = (cell, key) => {
      const u = usage.get(key);
      const out = cell.querySelector('.usage-out');
      clear(out);
      if (!u) return;
      if (u.error) { out.append(el('span', { class: 'error' }, u.error)); return; }
      const { used_bytes: used, free_bytes: free, total_bytes: total } = u;
      if (typeof total === 'number' && total > 0 && typeof used === 'number') {
        out.append(el('meter', { min: '0', max: String(total), value: String(used), low: String(total * 0.75), high: String(total * 0.9), optimum: '0' }));
      }
      out.append(el('span', { class: 'usage-text' },
        `${formatBytes(used)} used of ${formatBytes(total)}` +
        `${typeof total === 'number' && total > 0 ? ` (${Math.round((used / total) * 100)}%)` : ''}, ${formatBytes(free)} free`));
    };

    const checkUsage = async (r, button, cell) => {
      const key = resKey(r);
      const who = `${r.namespace}/${r.name}`;
      button.disabled = true;
      setStatus(`usage of ${who}: asking the operator…`, 'pending');
      try {
        const res = await postJSON(`/api/v1/deployments/${enc(deployment)}/commands`, {
          command: { name: 'agentfs_ls', namespace: r.namespace, fs_name: r.name, path: '/' },
          actor: 'dashboard',
        });
        if (res.ok) {
          const u = (res.body && res.body.result && res.body.result.usage) || {};
          usage.set(key, u);
          setStatus(`usage of ${who}: ${formatBytes(u.used_bytes)} used of ${formatBytes(u.total_bytes)}`, 'ok');
        } else {
          usage.set(key, { error: res.error });
          setStatus(`usage of ${who} failed (${res.status}): ${res.error}`, 'failed');
        }
      } catch (err) {
        if (err.status !== 401) {
          usage.set(key, { error: err.message });
          setStatus(`usage of ${who} failed: ${err.message}`, 'failed');
        }
      } finally {
        button.disabled = false;
        const row = rows.get(key);
        if (row) renderUsage(row.usage, key);
        else renderUsage(cell, key);
      }
    };

    const render = () => {
      const list = [...set.map.values()].filter((r) => r.kind === 'AgentFS').sort(compareRes);
      const keep = new Set(list.map(resKey));
      for (const [key, row] of rows) if (!keep.has(key)) { row.tr.remove(); rows.delete(key); }
      let prev = null;
      for (const r of list) {
        const key = resKey(r);
        let row = rows.get(key);
        if (!row) {
          const button = el('button', { type: 'button', class: 'small', dataset: { action: 'usage' }, 'aria-label': `check usage of ${r.namespace}/${r.name}` }, 'Check usage');
          const usageCell = el('td', { class: 'usage' }, button, el('div', { class: 'usage-out' }));
          row = {
            tr: el('tr', { dataset: { namespace: r.namespace, name: r.name } }),
            phase: el('span', { class: 'phase' }),
            size: el('td', { class: 'nowrap' }),
            requested: el('td', { class: 'requested num' }),
            provisioned: el('td', { class: 'provisioned num' }),
            pvc: el('td', { class: 'pvc mono' }),
            mounted: el('td', { class: 'mounted-by' }),
            usage: usageCell,
          };
          button.addEventListener('click', () => checkUsage(rows.get(key).r, button, usageCell));
          row.tr.append(el('td', null, r.namespace), el('th', { scope: 'row' }, r.name), el('td', null, row.phase),
            row.size, row.requested, row.provisioned, row.pvc, row.mounted, usageCell);
          rows.set(key, row);
          renderUsage(usageCell, key);
        }
        // keep DOM order = sorted order, inserting only where needed
        const want = prev ? prev.tr.nextSibling : tbody.firstChild;
        if (want !== row.tr) tbody.insertBefore(row.tr, want);
        prev = row;
        row.r = r;
        const spec = r.spec || {};
        const status = r.status || {};
        const p = resourcePhase(r);
        row.phase.textContent = p || '—';
        row.phase.dataset.phase = p;
        row.size.textContent = `${dash(spec.size)}${spec.maxSize ? ` (${spec.maxSize})` : ''}`;
        row.requested.textContent = dash(status.requested);
        row.provisioned.textContent = dash(status.provisioned);
        row.provisioned.title = status.requested && status.provisioned && status.requested !== status.provisioned
          ? 'an expansion is in flight' : '';
        row.pvc.textContent = dash(status.pvcName);
        const mb = Array.isArray(status.mountedBy) ? status.mountedBy : [];
        row.mounted.textContent = mb.length ? mb.join(', ') : '—';
      }
      empty.hidden = list.length !== 0;
    };

    const set = resourceSet(deployment, render, {
      handlers: { deployment: summary.render },
      onResync: () => summary.load().catch(() => {}),
    });
    summary.load().catch(() => {});
    set.load().catch((err) => { if (err.status !== 401) setStatus(`Could not load the resources: ${err.message}`, 'failed'); });
    live(deployment, set.handlers, set.reload);
  }

  // ----------------------------------------------------------------- audit

  function pageAudit(main, deployment) {
    const params = new URLSearchParams(location.search);
    const before = params.get('before');
    const { table, tbody } = dataTable('audit', [
      'Time', 'Source', 'Actor', 'Action', 'Target', 'Outcome', 'Detail',
    ]);
    const pager = el('div', { class: 'pager' });
    const sub = el('p', { class: 'sub' }, before ? `Older records, before #${before}` : 'Newest first');
    clear(main).append(pageHead(`Audit · ${deployment}`, null, sub), el('div', { class: 'card table-wrap' }, table), pager);
    const seen = new Set();

    const row = (a) => {
      const detail = a.detail === null || a.detail === undefined ? '' :
        (typeof a.detail === 'string' ? a.detail : JSON.stringify(a.detail));
      const outcome = str(a.outcome);
      const okish = outcome === 'ok' || outcome === 'registered' || outcome.startsWith('exited: 0');
      return el('tr', { dataset: { id: str(a.id), action: str(a.action) } },
        el('td', { class: 'nowrap' }, timeEl(typeof a.at_ms === 'number' ? a.at_ms : null)),
        el('td', null, str(a.source)),
        el('td', null, str(a.actor)),
        el('th', { scope: 'row', class: 'mono' }, str(a.action)),
        el('td', { class: 'mono' }, str(a.target)),
        el('td', { class: 'outcome', dataset: { ok: okish ? 'true' : (outcome.startsWith('failed') || outcome.includes('refused') || outcome.includes('timed out') || outcome.includes('lost') ? 'false' : 'other') } }, outcome),
        el('td', { class: 'detail', title: detail || null }, detail));
    };

    const load = async () => {
      const q = new URLSearchParams({ limit: '50' });
      if (before) q.set('before', before);
      try {
        const res = await getJSON(`/api/v1/deployments/${enc(deployment)}/audit?${q}`);
        // newest first, whatever order the page comes in
        const list = (Array.isArray(res.audit) ? res.audit : []).slice().sort((x, y) => y.id - x.id);
        clear(tbody);
        seen.clear();
        for (const a of list) { seen.add(a.id); tbody.append(row(a)); }
        if (!list.length) tbody.append(el('tr', null, el('td', { colspan: '7', class: 'empty' }, 'No audit records.')));
        clear(pager);
        if (before) pager.append(el('a', { id: 'newest', href: location.pathname }, '« Newest'));
        if (res.next_before !== null && res.next_before !== undefined) {
          pager.append(el('a', { id: 'older', href: `?before=${enc(String(res.next_before))}` }, 'Older »'));
        }
      } catch (err) {
        if (err.status !== 401) showError(pager, err);
      }
    };

    load();
    live(deployment, {
      audit: (a) => {
        // only the first page grows live; older pages are history
        if (before || !a || a.deployment !== deployment || seen.has(a.id)) return;
        seen.add(a.id);
        const placeholder = tbody.querySelector('td.empty');
        if (placeholder) placeholder.closest('tr').remove();
        tbody.insertBefore(row(a), tbody.firstChild);
      },
    }, load);
  }

  // ----------------------------------------------------------------- shell

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const s = el('script', { src });
      s.addEventListener('load', resolve);
      s.addEventListener('error', () => reject(new Error(`could not load ${src}`)));
      document.head.append(s);
    });
  }

  function loadStylesheet(href) {
    return new Promise((resolve) => {
      const l = el('link', { rel: 'stylesheet', href });
      l.addEventListener('load', resolve);
      l.addEventListener('error', resolve);
      document.head.append(l);
    });
  }

  // xterm.js 6 styles its DOM renderer with <style> elements it fills with
  // text, and truecolour cells with setAttribute('style', …); the CSP
  // (style-src 'self') refuses both as inline styles. On the shell page
  // only, both go through the CSSOM instead, which the CSP allows and which
  // any script could use anyway (the CSP's protection against styles in
  // parsed markup, the part an injection could use, is untouched):
  // (1) createElement('style') makes an inert <exo-style> element (hidden by
  //     app.css) whose text is copied into a constructed stylesheet;
  // (2) setAttribute('style', v) on an HTML element sets element.style.cssText.
  const STYLE_TAG = 'exo-style';
  function cspStyleBridge(root) {
    const nativeSetAttribute = Element.prototype.setAttribute;
    Element.prototype.setAttribute = function setAttribute(name, value) {
      if (this instanceof HTMLElement && String(name).toLowerCase() === 'style') {
        this.style.cssText = String(value);
        return;
      }
      nativeSetAttribute.call(this, name, value);
    };
    const nativeCreateElement = Document.prototype.createElement;
    Document.prototype.createElement = function createElement(name, options) {
      const tag = String(name).toLowerCase() === 'style' ? STYLE_TAG : name;
      return nativeCreateElement.call(this, tag, options);
    };
    const sheets = new Map(); // <exo-style> element -> CSSStyleSheet
    const sync = () => {
      for (const scope of [root, document.head]) {
        for (const node of scope.querySelectorAll(STYLE_TAG)) if (!sheets.has(node)) sheets.set(node, new CSSStyleSheet());
      }
      const ours = new Set(sheets.values());
      const others = document.adoptedStyleSheets.filter((sheet) => !ours.has(sheet));
      for (const [node, sheet] of sheets) {
        if (!node.isConnected) sheets.delete(node);
        else sheet.replaceSync(node.textContent || '');
      }
      document.adoptedStyleSheets = [...others, ...sheets.values()];
    };
    const touches = (n) => n.nodeType === Node.ELEMENT_NODE && (n.localName === STYLE_TAG || n.querySelector(STYLE_TAG));
    const observer = new MutationObserver((records) => {
      const styles = records.some((rec) => {
        const parent = rec.type === 'characterData' ? rec.target.parentNode : rec.target;
        return (parent && parent.localName === STYLE_TAG) ||
          [...rec.addedNodes].some(touches) || [...rec.removedNodes].some(touches);
      });
      if (styles) sync();
    });
    for (const scope of [root, document.head]) {
      observer.observe(scope, { subtree: true, childList: true, characterData: true });
    }
    sync();
  }

  function pageShell(main, deployment) {
    const summary = deploymentSummary(deployment);
    const params = new URLSearchParams(location.search);
    const namespace = params.get('namespace') || '';
    const agent = params.get('agent') || '';
    const status = el('span', { id: 'shell-status', role: 'status', 'aria-live': 'polite', dataset: { state: 'connecting' } }, 'Loading the terminal…');
    const again = el('button', { type: 'button', id: 'reconnect', hidden: true }, 'Connect again');
    const term = el('div', { id: 'terminal', 'aria-label': `terminal on ${namespace}/${agent}` });
    clear(main).append(
      el('div', { class: 'shell-bar' },
        el('h1', null, `Shell · ${namespace}/${agent}`),
        el('span', { class: 'muted' }, `on ${deployment}`),
        status, again),
      summary.box,
      term);
    summary.load().catch(() => {});
    live(deployment, { deployment: summary.render }, () => summary.load().catch(() => {}));

    const say = (text, state) => { status.textContent = text; status.dataset.state = state; };

    if (!namespace || !agent) {
      say('This page needs ?namespace=…&agent=… (open it from the deployment page).', 'ended');
      return;
    }

    Promise.all([
      loadStylesheet('/assets/vendor/xterm.css'),
      loadScript('/assets/vendor/xterm.js').then(() => loadScript('/assets/vendor/addon-fit.js')),
    ]).then(() => {
      const Terminal = window.Terminal;
      const FitAddon = window.FitAddon && window.FitAddon.FitAddon;
      if (typeof Terminal !== 'function' || typeof FitAddon !== 'function') throw new Error('xterm.js did not load');
      cspStyleBridge(term);
      const terminal = new Terminal({
        cursorBlink: true,
        convertEol: false,
        fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace',
        fontSize: 14,
        scrollback: 5000,
        theme: { background: '#0d1117', foreground: '#e6edf3', cursor: '#e6edf3', selectionBackground: '#264f78' },
      });
      const fit = new FitAddon();
      terminal.loadAddon(fit);
      terminal.open(term);
      try { fit.fit(); } catch (_) { /* not laid out yet */ }
      connect(terminal, fit);
      new ResizeObserver(() => { try { fit.fit(); } catch (_) { /* hidden */ } }).observe(term);
    }).catch((err) => say(`Could not start the terminal: ${err.message}`, 'ended'));

    let socket = null;
    let disposers = [];

    const connect = (terminal, fit) => {
      disposers.forEach((d) => d.dispose());
      disposers = [];
      again.hidden = true;
      const q = new URLSearchParams({
        namespace, agent, tty: 'true',
        cols: String(terminal.cols), rows: String(terminal.rows), actor: 'dashboard',
      });
      const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
      const ws = new WebSocket(`${scheme}//${location.host}/api/v1/deployments/${enc(deployment)}/attach?${q}`);
      ws.binaryType = 'arraybuffer';
      socket = ws;
      let reason = null;
      const encoder = new TextEncoder();
      say(`Connecting to ${namespace}/${agent}…`, 'connecting');

      ws.addEventListener('open', () => {
        say(`Connected to ${namespace}/${agent}`, 'open');
        terminal.focus();
      });
      ws.addEventListener('message', (ev) => {
        if (typeof ev.data === 'string') {
          let msg = null;
          try { msg = JSON.parse(ev.data); } catch (_) { /* not JSON */ }
          if (msg && typeof msg.reason === 'string') {
            reason = msg.reason;
            say(`Session ended: ${reason}`, 'ended');
            terminal.write(`\r\n\x1b[2m[session ended: ${reason.replace(/[\x00-\x1f\x7f]/g, ' ')}]\x1b[0m\r\n`);
          } else {
            terminal.write(ev.data);
          }
        } else {
          terminal.write(new Uint8Array(ev.data));
        }
      });
      ws.addEventListener('close', (ev) => {
        if (socket !== ws) return;
        if (reason === null) {
          const why = ev.reason || (ev.code === 1006 ? 'connection failed or was refused (is the deployment online?)' : `closed (${ev.code})`);
          say(`Session ended: ${why}`, 'ended');
          terminal.write(`\r\n\x1b[2m[${why}]\x1b[0m\r\n`);
        }
        again.hidden = false;
      });
      const send = (data) => { if (ws.readyState === WebSocket.OPEN) ws.send(data); };
      disposers.push(terminal.onData((data) => send(encoder.encode(data))));
      disposers.push(terminal.onBinary((data) => {
        const bytes = new Uint8Array(data.length);
        for (let i = 0; i < data.length; i += 1) bytes[i] = data.charCodeAt(i) & 0xff;
        send(bytes);
      }));
      disposers.push(terminal.onResize(({ cols, rows }) => send(JSON.stringify({ resize: { cols, rows } }))));
      again.onclick = null;
      again.addEventListener('click', () => { terminal.reset(); try { fit.fit(); } catch (_) { /* */ } connect(terminal, fit); }, { once: true });
    };

    window.addEventListener('pagehide', () => { if (socket) socket.close(1000, 'closed by the user'); });
  }

  // ------------------------------------------------------------------ boot

  function boot() {
    setupTheme();
    const r = route(location.pathname);
    if (r.page === 'login' || document.body.dataset.page === 'login') {
      document.body.dataset.page = 'login';
      document.body.dataset.live = 'closed';
      const token = $('#token');
      if (token && $('#login-error')) token.setAttribute('aria-describedby', 'login-error');
      return;
    }
    document.body.dataset.page = r.page;
    buildNav(r);
    setupLogout();
    const main = $('#main');
    const titles = { overview: 'Fleet', deployment: r.deployment, waves: 'Waves', storage: 'Storage', audit: 'Audit', shell: 'Shell' };
    document.title = `${r.deployment && r.page !== 'deployment' ? `${titles[r.page]} · ${r.deployment}` : titles[r.page] || 'Not found'} · Exo`;
    switch (r.page) {
      case 'overview': pageOverview(main); break;
      case 'deployment': pageDeployment(main, r.deployment); break;
      case 'waves': pageWaves(main, r.deployment); break;
      case 'storage': pageStorage(main, r.deployment); break;
      case 'audit': pageAudit(main, r.deployment); break;
      case 'shell': pageShell(main, r.deployment); break;
      default:
        document.body.dataset.live = 'closed';
        clear(main).append(pageHead('Not found', null), el('p', null, el('a', { href: '/' }, 'Back to the fleet')));
    }
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', boot);
  else boot();
})();
