// The Storage page: every AgentFS, its capacity, PVC and mounts, its backups and restore drills, and usage on request; then App storage.

import { $, clear, el, enc } from './dom.js';
import { getJSON, postJSON } from './api.js';
import { dash, formatBytes, formatShortAge } from './format.js';
import { live } from './live.js';
import { dataTable, pageHead, setStatus } from './page.js';
import { compareRes, deploymentSummary, resKey, resourcePhase, resourceSet } from './resources.js';
import { appStorageSection } from './app-storage.js';

export function pageStorage(main, deployment) {
  const summary = deploymentSummary(deployment);
  const { table, tbody } = dataTable('storage', [
    'Namespace', 'AgentFS', 'Phase', 'Size (max)', ['Requested', 'num'], ['Provisioned', 'num'], 'PVC', 'Mounted by', 'Backup', 'Drill', 'Usage',
  ]);
  const empty = el('p', { class: 'empty', hidden: true }, 'No AgentFS in this deployment’s view.');
  const apps = appStorageSection(deployment);
  clear(main).append(
    pageHead(`Infrastructure › Storage · ${deployment}`, 'Every AgentFS: capacity asked for and provisioned, its PVC, who mounts it, the age of its last good backup and its last restore drill; real usage on request (df through the operator). Then every App’s workspace and database.'),
    el('section', { class: 'card table-wrap storage', 'aria-labelledby': 'agentfs-title' },
      el('h2', { id: 'agentfs-title' }, 'File systems'), table, empty),
    apps.section);
  $('.page-head', main).append(summary.box);

  const rows = new Map();
  const usage = new Map(); // key -> last usage result (kept across re-renders)
  // The deployment's active alerts by key: whether a volume's backups or
  // drills are stale is the operator's rule, sent as the keyed alerts
  // backup/stale/<ns>/<name>, backup/drill-stale/…, backup/drill-failed/…
  // (docs/backups.md); the page does not compute it again.
  const active = new Map();

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

  const loadActive = async () => {
    try {
      const res = await getJSON(`/api/v1/deployments/${enc(deployment)}/alerts/active`);
      active.clear();
      for (const a of Array.isArray(res.active) ? res.active : []) if (a && a.key) active.set(a.key, a);
      render();
    } catch (_) { /* the last known set stays */ }
  };

  const ageOf = (time) => {
    const t = Date.parse(time);
    return Number.isNaN(t) ? null : Date.now() - t;
  };

  // The Backup cell: — without a policy; pending before an outcome or
  // while the status is for an older generation of the policy; stale
  // while its alert is active; failing (reason) when the last attempt
  // failed; else the age of the last good backup.
  const backupCell = (r) => {
    const spec = r.spec || {};
    const st = (r.status && r.status.backup) || null;
    if (!spec.backup) return { state: 'none', text: '—', title: 'no backup policy' };
    const stale = active.get(`backup/stale/${r.namespace}/${r.name}`);
    const ok = st && st.lastSuccess;
    const err = st && st.lastError;
    const failing = err && (!ok || Date.parse(err.time) >= Date.parse(ok.time));
    const why = failing ? `failing (${err.reason})` : '';
    if (stale) return { state: 'stale', text: why ? `stale, ${why}` : 'stale', title: stale.message };
    const behind = !st || typeof st.observedGeneration !== 'number' ||
      (typeof r.generation === 'number' && st.observedGeneration < r.generation);
    if (behind || (!ok && !err)) return { state: 'pending', text: 'pending', title: 'no outcome for this policy yet' };
    if (failing) return { state: 'failing', text: why, title: err.message };
    return { state: 'ok', text: formatShortAge(ageOf(ok.time)), title: `last good backup ${ok.time}: ${ok.digest}` };
  };

  // The Drill cell: FAILED, stale while its alert is active, passed and
  // how long ago, or — (no policy, no drill yet).
  const drillCell = (r) => {
    const spec = r.spec || {};
    const st = (r.status && r.status.backup) || null;
    const d = spec.backup && st ? st.lastDrill : null;
    if (!spec.backup) return { state: 'none', text: '—', title: '' };
    if (d && d.passed === false) return { state: 'failed', text: 'FAILED', title: dash(d.message) };
    const stale = active.get(`backup/drill-stale/${r.namespace}/${r.name}`);
    const passed = d ? `passed ${formatShortAge(ageOf(d.time))}` : '';
    if (stale) return { state: 'stale', text: passed ? `stale, ${passed}` : 'stale', title: stale.message };
    if (d) return { state: 'passed', text: passed, title: `drill of ${d.digest} at ${d.time}` };
    return { state: 'none', text: '—', title: 'no drill yet' };
  };

  const show = (cell, c) => {
    cell.textContent = c.text;
    cell.dataset.state = c.state;
    cell.title = c.title || '';
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
          backup: el('td', { class: 'backup nowrap' }),
          drill: el('td', { class: 'drill nowrap' }),
          usage: usageCell,
        };
        button.addEventListener('click', () => checkUsage(rows.get(key).r, button, usageCell));
        row.tr.append(el('td', null, r.namespace), el('th', { scope: 'row' }, r.name), el('td', null, row.phase),
          row.size, row.requested, row.provisioned, row.pvc, row.mounted, row.backup, row.drill, usageCell);
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
      show(row.backup, backupCell(r));
      show(row.drill, drillCell(r));
    }
    empty.hidden = list.length !== 0;
  };

  const set = resourceSet(deployment, render, {
    handlers: {
      deployment: summary.render,
      alerts: (ev) => { if (ev.deployment === deployment) loadActive(); },
    },
    onResync: () => { summary.load().catch(() => {}); loadActive(); },
  });
  summary.load().catch(() => {});
  loadActive();
  set.load().catch((err) => { if (err.status !== 401) setStatus(`Could not load the resources: ${err.message}`, 'failed'); });
  live(deployment, set.handlers, set.reload);
}
