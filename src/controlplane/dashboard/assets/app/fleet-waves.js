// The fleet's Waves page: every cluster's Rollouts from the control plane's fleet view (GET /api/v1/fleet/rollouts), one row per tenant, one cell per cluster, grouped by wave.

import { clear, el, enc } from './dom.js';
import { getJSON } from './api.js';
import { dash, str } from './format.js';
import { liveAt } from './live.js';
import { pageHead, showError } from './page.js';
import { compareWave, rolloutIsCurrent } from './saga-steps.js';

const VIEW = '/api/v1/fleet/rollouts';

// What one (tenant, cluster) cell shows: `unknown` when the cluster is
// offline (its last known Rollout in the title, never as verified),
// `empty` when the tenant has no Rollout there, `stale` when the status
// is for an older spec, else the Rollout's phase.
export function cellState(rollout, online) {
  if (!online) return 'unknown';
  if (!rollout) return 'empty';
  if (!rolloutIsCurrent(rollout)) return 'stale';
  return str((rollout.status && rollout.status.phase) || 'Pending').toLowerCase();
}

export function pageFleetWaves(main) {
  const body = el('div', { id: 'fleet-waves' }, el('p', { class: 'muted' }, 'Loading…'));
  const count = el('p', { class: 'sub' }, '');
  const legend = el('ul', { class: 'legend', 'aria-label': 'Legend' },
    ['verified', 'progressing', 'waiting', 'failed', 'pending'].map((s) =>
      el('li', null, el('span', { class: 'swatch', dataset: { state: s }, 'aria-hidden': 'true' }), s)),
    el('li', null, el('span', { class: 'swatch stale', 'aria-hidden': 'true' }), 'stale (status for an older spec)'),
    el('li', null, el('span', { class: 'swatch unknown', 'aria-hidden': 'true' }), 'unknown (cluster offline)'));
  clear(main).append(
    pageHead('Waves across clusters', 'One row per tenant, one cell per cluster (a deployment of the control plane): the phase and release of the tenant’s Rollout there.', count),
    legend, body);

  const render = (view) => {
    const clusters = (Array.isArray(view.clusters) ? view.clusters : [])
      .slice().sort((a, b) => (a.deployment < b.deployment ? -1 : a.deployment > b.deployment ? 1 : 0));
    const online = new Map(clusters.map((c) => [c.deployment, !!c.online]));
    const rollouts = Array.isArray(view.rollouts) ? view.rollouts : [];
    const up = clusters.filter((c) => c.online).length;
    count.textContent = `${clusters.length} cluster${clusters.length === 1 ? '' : 's'}, ${up} online; ${rollouts.length} Rollout${rollouts.length === 1 ? '' : 's'}`;
    clear(body);
    if (!rollouts.length) {
      body.append(el('p', { class: 'empty card' }, 'No Rollout in any cluster’s view.'));
      return;
    }
    // wave -> tenant -> cluster -> Rollout
    const waves = new Map();
    for (const fr of rollouts) {
      const r = fr.resource || {};
      const wave = str((r.spec && r.spec.wave) || '(none)');
      const tenant = str(r.namespace);
      if (!waves.has(wave)) waves.set(wave, new Map());
      const tenants = waves.get(wave);
      if (!tenants.has(tenant)) tenants.set(tenant, new Map());
      tenants.get(tenant).set(str(fr.deployment), r);
    }
    [...waves.keys()].sort(compareWave).forEach((wave, waveIndex) => {
      const tenants = waves.get(wave);
      const names = [...tenants.keys()].sort();
      let pairs = 0; let verified = 0;
      const tbody = el('tbody');
      for (const tenant of names) {
        const byCluster = tenants.get(tenant);
        const tr = el('tr', { class: 'tenant', dataset: { tenant } }, el('th', { scope: 'row' }, tenant));
        for (const c of clusters) {
          const r = byCluster.get(c.deployment);
          const state = cellState(r, online.get(c.deployment));
          if (r) pairs += 1;
          if (r && state === 'verified') verified += 1;
          tr.append(cell(c, r, state));
        }
        tbody.append(tr);
      }
      body.append(el('section', { class: 'wave card', dataset: { wave }, 'aria-labelledby': `fleet-wave-${waveIndex}` },
        el('div', { class: 'wave-head' },
          el('h2', { id: `fleet-wave-${waveIndex}` }, wave),
          el('span', { class: 'muted' }, `${names.length} tenant${names.length === 1 ? '' : 's'}, ${verified} of ${pairs} placed pairs verified`)),
        el('div', { class: 'table-wrap' },
          el('table', null,
            el('thead', null, el('tr', null,
              el('th', { scope: 'col' }, 'Tenant'),
              clusters.map((c) => el('th', { scope: 'col', dataset: { cluster: c.deployment, online: String(!!c.online) } },
                el('a', { href: `/deployments/${enc(c.deployment)}/waves` }, c.deployment),
                c.online ? null : el('span', { class: 'badge offline', title: c.lastSeen ? `last seen ${c.lastSeen}` : 'never connected' }, 'offline'))))),
            tbody))));
    });
  };

  const cell = (cluster, r, state) => {
    const td = el('td', { class: 'fleet-cell', dataset: { cluster: cluster.deployment, state } });
    if (state === 'empty') return td;
    const spec = (r && r.spec) || {};
    const status = (r && r.status) || {};
    const label = state === 'unknown' ? 'unknown' : state === 'stale' ? 'stale' : dash(status.phase);
    const title = [
      state === 'unknown' ? `cluster offline${cluster.lastSeen ? ` since ${cluster.lastSeen}` : ''}` : null,
      r ? `last known: ${dash(status.phase)} for release ${dash(status.release || spec.release)}` : null,
      status.message ? str(status.message) : null,
    ].filter(Boolean).join('\n');
    td.title = title;
    td.append(el('span', { class: 'phase' }, label));
    if (r) td.append(el('span', { class: 'release' }, dash(spec.release)));
    return td;
  };

  // Changes come in bursts (a snapshot, a wave's deltas): one read for each.
  let pending = null;
  const load = async () => {
    try {
      render(await getJSON(VIEW));
    } catch (err) {
      if (err.status !== 401) showError(body, err);
    }
  };
  const soon = () => {
    if (pending) return;
    pending = setTimeout(() => { pending = null; load(); }, 150);
  };
  load();
  liveAt('/api/v1/events', VIEW, { fleet: soon, deployment: soon }, soon);
}
