// The Fleet page: every deployment, its state, heartbeat, version, capabilities, alerts and open circuits.

import { clear, el, enc } from './dom.js';
import { getJSON } from './api.js';
import { dash, str } from './format.js';
import { frameSeen, heartbeatText, noteHeartbeat, tickHeartbeats } from './heartbeat.js';
import { live } from './live.js';
import { dataTable, pageHead, stateBadge } from './page.js';

const CIRCUIT_OPEN = 'circuit/open/';

export function pageOverview(main) {
  const rows = new Map();
  const activeAlerts = new Map(); // name -> [active alert]
  const { table, tbody } = dataTable('deployments', [
    'Deployment', 'State', 'Last heartbeat', 'Operator version', 'Capabilities', 'Active alerts', 'Open circuits',
  ]);
  const count = el('p', { class: 'sub' }, 'Loading…');
  const lanes = dataTable('lanes', ['Support lane', 'Open', 'Acknowledged', 'Resolved', 'Tenants']);
  const lanesCard = el('section', { class: 'card table-wrap', hidden: true },
    el('h2', null, 'Support lanes'), lanes.table);
  clear(main).append(pageHead('Fleet', null, count), el('div', { class: 'card table-wrap' }, table), lanesCard);

  // The support lanes and their open incidents (docs/support.md); each
  // links to its lane's page (live there). Read again every 15 s and on
  // every resync.
  const loadLanes = async () => {
    try {
      const res = await getJSON('/api/v1/lanes');
      const list = Array.isArray(res.lanes) ? res.lanes : [];
      clear(lanes.tbody);
      for (const l of list) {
        lanes.tbody.append(el('tr', { dataset: { lane: str(l.lane) } },
          el('th', { scope: 'row' }, el('a', { href: `/lanes/${enc(l.lane)}` }, str(l.lane))),
          el('td', { class: 'open' }, String(l.routed || 0)),
          el('td', null, String(l.acknowledged || 0)),
          el('td', null, String(l.resolved || 0)),
          el('td', null, (l.tenants || []).join(', '))));
      }
      lanesCard.hidden = list.length === 0;
    } catch (_) { lanesCard.hidden = true; }
  };

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

  // Open circuits: the deployment's active `circuit/open/<tenant>/<service>/<id>`
  // alerts (docs/circuits.md), one per model deployment in outage.
  const renderCircuits = (cell, d) => {
    clear(cell);
    const open = (activeAlerts.get(d.name) || []).filter((a) => str(a.key).startsWith(CIRCUIT_OPEN));
    cell.dataset.count = String(open.length);
    if (!open.length) { cell.append(el('span', { class: 'muted' }, '0')); return; }
    cell.append(el('span', { class: 'circuit-count' }, open.length === 1 ? '1 open' : `${open.length} open`));
    const ul = el('ul');
    for (const a of open.slice(0, 3)) {
      const [tenant, service, ...id] = str(a.key).slice(CIRCUIT_OPEN.length).split('/');
      ul.append(el('li', { title: str(a.message), dataset: { tenant, service } },
        `${tenant}/${service}: `, el('span', { class: 'circuit' }, id.join('/'))));
    }
    if (open.length > 3) ul.append(el('li', { class: 'muted' }, `and ${open.length - 3} more`));
    cell.append(ul);
  };

  const fetchAlerts = async (d) => {
    const render = () => {
      const row = rows.get(d.name);
      if (row) { renderAlerts(row.alerts, row.d); renderCircuits(row.circuits, row.d); }
    };
    if (!d.active_alerts) { activeAlerts.delete(d.name); render(); return; }
    try {
      const res = await getJSON(`/api/v1/deployments/${enc(d.name)}/alerts/active`);
      activeAlerts.set(d.name, Array.isArray(res.active) ? res.active : []);
      render();
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
        circuits: el('td', { class: 'circuits' }),
      };
      tr.append(row.name, row.state, row.heartbeat, row.version, row.capabilities, row.alerts, row.circuits);
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
    renderCircuits(row.circuits, d);
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
  loadLanes();
  setInterval(loadLanes, 15000);
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
  }, () => { load(); loadLanes(); });
}
