// The Storage page: every AgentFS, its capacity, PVC and mounts, and usage on request; then App storage.

import { $, clear, el, enc } from './dom.js';
import { postJSON } from './api.js';
import { dash, formatBytes } from './format.js';
import { live } from './live.js';
import { dataTable, pageHead, setStatus } from './page.js';
import { compareRes, deploymentSummary, resKey, resourcePhase, resourceSet } from './resources.js';
import { appStorageSection } from './app-storage.js';

export function pageStorage(main, deployment) {
  const summary = deploymentSummary(deployment);
  const { table, tbody } = dataTable('storage', [
    'Namespace', 'AgentFS', 'Phase', 'Size (max)', ['Requested', 'num'], ['Provisioned', 'num'], 'PVC', 'Mounted by', 'Usage',
  ]);
  const empty = el('p', { class: 'empty', hidden: true }, 'No AgentFS in this deployment’s view.');
  const apps = appStorageSection(deployment);
  clear(main).append(
    pageHead(`Infrastructure › Storage · ${deployment}`, 'Every AgentFS: capacity asked for and provisioned, its PVC, who mounts it; real usage on request (df through the operator). Then every App’s workspace and database.'),
    el('section', { class: 'card table-wrap storage', 'aria-labelledby': 'agentfs-title' },
      el('h2', { id: 'agentfs-title' }, 'File systems'), table, empty),
    apps.section);
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
    apps.render([...set.map.values()]);
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
