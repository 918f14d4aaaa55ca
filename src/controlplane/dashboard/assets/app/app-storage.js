// The Storage page's App storage section: each App's workspace and database volumes, live, and the volumes kept after their App was deleted, on request.

import { clear, el, enc } from './dom.js';
import { postJSON } from './api.js';
import { dash } from './format.js';
import { setStatus, dataTable } from './page.js';
import { compareRes, resourcePhase } from './resources.js';

const VOLUMES = [
  ['workspace', (spec) => spec.workspace],
  ['database', (spec) => spec.database && spec.database.postgres],
];

// The rows of one App resource: its workspace, then its database if it has one.
function appRows(r) {
  const spec = r.spec || {};
  const status = r.status || {};
  // A status computed for another generation is not about this spec.
  const stale = typeof r.generation === 'number' && status.observedGeneration !== r.generation;
  const out = [];
  for (const [volume, of] of VOLUMES) {
    const want = of(spec);
    if (!want) continue;
    const st = status[volume] || {};
    out.push({
      key: `${r.namespace}\u0000${r.name}\u0000${volume}`,
      namespace: r.namespace, app: r.name, appPhase: resourcePhase(r) || '', stale, volume,
      phase: st.phase || '', size: want.size, maxSize: want.maxSize,
      requested: st.requested, provisioned: st.provisioned, pvc: st.pvcName,
    });
  }
  return out;
}

// A row of `app_volumes` for a volume whose App is gone.
function retainedRow(i) {
  return {
    key: `${i.namespace}\u0000${i.app}\u0000${i.volume}`,
    namespace: i.namespace, app: i.app, appPhase: 'deleted', stale: false, volume: i.volume,
    phase: 'Retained', size: i.size, maxSize: i.maxSize,
    requested: i.requested, provisioned: i.provisioned, pvc: i.pvc,
  };
}

function fill(tr, row) {
  const phase = (text, stale) => {
    const s = el('span', { class: 'phase', dataset: { phase: text } }, `${text || '—'}${stale ? ' (stale)' : ''}`);
    if (stale) { s.dataset.stale = 'true'; s.title = 'computed for an older generation of the App'; }
    return s;
  };
  const provisioned = el('td', { class: 'provisioned num' }, dash(row.provisioned));
  if (row.requested && row.provisioned && row.requested !== row.provisioned) provisioned.title = 'an expansion is in flight';
  clear(tr).append(
    el('td', null, row.namespace),
    el('th', { scope: 'row' }, row.app),
    el('td', { class: 'app-phase' }, phase(row.appPhase, row.stale)),
    el('td', { class: 'volume' }, row.volume),
    el('td', { class: 'volume-phase' }, phase(row.phase, row.stale)),
    el('td', { class: 'nowrap size' }, `${dash(row.size)}${row.maxSize ? ` (${row.maxSize})` : ''}`),
    el('td', { class: 'requested num' }, dash(row.requested)),
    provisioned,
    el('td', { class: 'pvc mono' }, dash(row.pvc)));
  tr.dataset.namespace = row.namespace;
  tr.dataset.app = row.app;
  tr.dataset.volume = row.volume;
  tr.dataset.phase = row.phase;
}

// The section, and render(resources) to call whenever the live set changes.
export function appStorageSection(deployment) {
  const { table, tbody } = dataTable('app-storage', [
    'Namespace', 'App', 'App phase', 'Volume', 'Phase', 'Size (max)', ['Requested', 'num'], ['Provisioned', 'num'], 'PVC',
  ]);
  const empty = el('p', { class: 'empty', hidden: true }, 'No App in this deployment’s view.');
  const button = el('button', { type: 'button', class: 'small', dataset: { action: 'retained' } }, 'List retained volumes');
  const section = el('section', { class: 'card table-wrap storage', 'aria-labelledby': 'app-storage-title' },
    el('h2', { id: 'app-storage-title' }, 'App storage'),
    el('p', { class: 'sub' }, 'Each App’s workspace and database volume (grow-only, up to maxSize). Volumes kept after their App was deleted (retain) are listed on request.'),
    button, table, empty);
  let live = [];
  let retained = [];

  const draw = () => {
    const liveApps = new Set(live.map((r) => `${r.namespace}\u0000${r.name}`));
    const rows = live.flatMap(appRows)
      .concat(retained.filter((r) => !liveApps.has(`${r.namespace}\u0000${r.app}`)));
    clear(tbody);
    for (const row of rows) {
      const tr = el('tr');
      fill(tr, row);
      tbody.append(tr);
    }
    empty.hidden = rows.length !== 0;
  };

  button.addEventListener('click', async () => {
    button.disabled = true;
    setStatus('retained app volumes: asking the operator…', 'pending');
    try {
      const res = await postJSON(`/api/v1/deployments/${enc(deployment)}/commands`, {
        command: { name: 'app_volumes' }, actor: 'dashboard',
      });
      if (res.ok) {
        const items = (res.body && res.body.result && res.body.result.items) || [];
        retained = items.filter((i) => i.phase === 'Retained').map(retainedRow);
        setStatus(`retained app volumes: ${retained.length}`, 'ok');
        draw();
      } else {
        setStatus(`retained app volumes failed (${res.status}): ${res.error}`, 'failed');
      }
    } catch (err) {
      if (err.status !== 401) setStatus(`retained app volumes failed: ${err.message}`, 'failed');
    } finally {
      button.disabled = false;
    }
  });

  const render = (resources) => {
    live = resources.filter((r) => r.kind === 'App').sort(compareRes);
    draw();
  };
  return { section, render };
}
