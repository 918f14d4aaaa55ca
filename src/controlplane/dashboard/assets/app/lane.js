// A support lane's page: its incidents, newest first, with the technical
// detail support reads (secrets masked), filtered by state; acknowledge and
// resolve buttons; live through the lane's own events stream.

import { clear, el, enc } from './dom.js';
import { getJSON, postJSON } from './api.js';
import { dash, str, timeEl } from './format.js';
import { liveAt } from './live.js';
import { dataTable, pageHead, setStatus, showError } from './page.js';

const STATES = ['all', 'routed', 'acknowledged', 'resolved'];

export function pageLane(main, lane) {
  const base = `/api/v1/lanes/${enc(lane)}`;
  let filter = new URLSearchParams(location.search).get('state') || 'all';
  if (!STATES.includes(filter)) filter = 'all';
  const counts = el('p', { class: 'sub', id: 'lane-counts' }, '');
  const tenants = el('p', { class: 'sub', id: 'lane-tenants' }, '');
  const tabs = el('div', { class: 'pager', id: 'lane-filter', role: 'group', 'aria-label': 'Show' });
  const { table, tbody } = dataTable('incidents', [
    'Received', 'Deployment', 'Tenant', 'Agent', 'Severity', 'State', 'Summary', 'Actions',
  ]);
  const problems = el('div');
  clear(main).append(pageHead(`Support lane · ${lane}`, null, counts, tenants), tabs,
    el('div', { class: 'card table-wrap' }, table), problems);

  const drawTabs = () => {
    clear(tabs);
    for (const s of STATES) {
      const b = el('button', { type: 'button', 'aria-pressed': s === filter ? 'true' : 'false', dataset: { state: s } }, s);
      b.addEventListener('click', () => {
        filter = s;
        history.replaceState(null, '', s === 'all' ? location.pathname : `?state=${s}`);
        drawTabs();
        reload();
      });
      tabs.append(b);
    }
  };

  const act = async (i, verb, button) => {
    button.disabled = true;
    const q = `?deployment=${enc(i.deployment)}`;
    const res = await postJSON(`${base}/incidents/${enc(i.id)}/${verb}${q}`, {});
    if (res.ok) {
      const moved = res.body && res.body.moved;
      setStatus(`${i.id}: ${moved ? `${res.body.incident.state} now; its tenant is told` : 'nothing changed'}`, 'ok');
    } else {
      setStatus(`${i.id}: ${res.error}`, 'failed');
      button.disabled = false;
    }
    reload();
  };

  const row = (i) => {
    const state = str(i.state);
    const actions = el('td', { class: 'nowrap' });
    if (state === 'routed') {
      const ack = el('button', { type: 'button', class: 'act-ack' }, 'Acknowledge');
      ack.addEventListener('click', () => act(i, 'ack', ack));
      actions.append(ack);
    }
    if (state !== 'resolved') {
      const res = el('button', { type: 'button', class: 'act-resolve' }, 'Resolve');
      res.addEventListener('click', () => act(i, 'resolve', res));
      actions.append(res);
    }
    const summary = el('details', null, el('summary', null, str(i.summary)),
      el('pre', { class: 'detail' }, i.detail ? str(i.detail) : '(no detail)'),
      i.note ? el('p', { class: 'sub' }, `Note: ${str(i.note)}`) : null);
    return el('tr', { dataset: { id: str(i.id), state } },
      el('td', { class: 'nowrap' }, timeEl(i.received_at)),
      el('td', null, str(i.deployment)),
      el('td', null, str(i.tenant)),
      el('td', null, str(i.agent)),
      el('td', null, str(i.severity)),
      el('td', { class: 'outcome', title: i.delivered ? 'its tenant sees this state' : 'its tenant is not told yet' },
        i.delivered ? state : `${state} …`),
      el('td', { class: 'detail' }, summary),
      actions);
  };

  const load = async () => {
    try {
      const [l, res] = await Promise.all([
        getJSON(base),
        getJSON(`${base}/incidents${filter === 'all' ? '' : `?state=${filter}`}`),
      ]);
      counts.textContent = `${l.routed || 0} open · ${l.acknowledged || 0} acknowledged · ${l.resolved || 0} resolved`;
      tenants.textContent = `Tenants: ${(l.tenants || []).length ? l.tenants.join(', ') : dash(null)}`;
      clear(tbody);
      const list = Array.isArray(res.incidents) ? res.incidents : [];
      for (const i of list) tbody.append(row(i));
      if (!list.length) tbody.append(el('tr', null, el('td', { colspan: '8', class: 'empty' }, 'No incidents.')));
      clear(problems);
    } catch (err) {
      if (err.status !== 401) showError(problems, err);
    }
  };

  // A busy lane sends an event per incident: at most one reload in
  // flight, and one more after it when something came meanwhile.
  let loading = null;
  let again = false;
  const reload = () => {
    if (loading) { again = true; return; }
    loading = load().finally(() => {
      loading = null;
      if (again) { again = false; setTimeout(reload, 250); }
    });
  };

  drawTabs();
  reload();
  liveAt(`${base}/events`, base, { lane: reload }, reload);
}
