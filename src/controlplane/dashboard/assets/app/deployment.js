// A deployment's Workloads page: its resources, a filter, pod controls and shell links.

import { $, clear, el, enc } from './dom.js';
import { postJSON } from './api.js';
import { str } from './format.js';
import { live } from './live.js';
import { dataTable, pageHead, setStatus, showError } from './page.js';
import { compareRes, deploymentSummary, resKey, resourcePhase, resourceSet } from './resources.js';

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
    case 'App': {
      if (spec.image) parts.push(spec.image);
      const vol = (name, v) => (v && v.size ? `${name} ${v.size}${v.maxSize ? ` (max ${v.maxSize})` : ''}` : null);
      const ws = vol('workspace', spec.workspace);
      const db = vol('database', spec.database && spec.database.postgres);
      if (ws) parts.push(ws);
      if (db) parts.push(db);
      if (spec.retain) parts.push('retain');
      if (status.podName) parts.push(`pod ${status.podName}`);
      break;
    }
    case 'Pod':
      if (spec.nodeName) parts.push(`node ${spec.nodeName}`);
      break;
    case 'Rollout':
      if (spec.release) parts.push(`release ${spec.release}`);
      if (spec.wave) parts.push(`wave ${spec.wave}`);
      if (status.currentStep) parts.push(`step ${status.currentStep}`);
      break;
    case 'AnalysisRun':
      if (spec.wave) parts.push(`wave ${spec.wave}`);
      if (spec.release) parts.push(`release ${spec.release}`);
      break;
    case 'Tenant':
      if (status.operation) parts.push(status.operation);
      if (status.currentStep) parts.push(`step ${status.currentStep}`);
      if (Array.isArray(status.steps) && status.steps.length) {
        const done = status.steps.filter((s) => s.state === 'Done').length;
        parts.push(`${done}/${status.steps.length} steps done`);
      }
      if (spec.offboarding) parts.push('offboarding');
      break;
    default:
      break;
  }
  if (status.message) parts.push(status.message);
  return parts.join(' · ');
}

export function pageDeployment(main, deployment) {
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
      el('td', null, r.namespace || '—'),
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
