// One deployment's live resource set (fetch, deltas, refetch), its ordering and its summary line.

import { clear, el, enc } from './dom.js';
import { getJSON } from './api.js';
import { dash, str } from './format.js';
import { frameSeen, heartbeatText, noteHeartbeat, tickHeartbeats } from './heartbeat.js';
import { stateBadge } from './page.js';

const KIND_ORDER = ['Agent', 'Tool', 'AgentFS', 'App', 'Pod', 'Rollout', 'AnalysisRun', 'Tenant'];
export const resKey = (r) => `${r.kind}\u0000${r.namespace}\u0000${r.name}`;
export function compareRes(a, b) {
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
export function resourceSet(deployment, onChange, extra = {}) {
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

export function deploymentSummary(deployment) {
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

// A Tenant's status is trusted only when it is about the spec the
// Tenant has now (its settings are not on the wire, so by generation).
export function resourcePhase(r) {
  if (r.kind === 'Tenant' && r.status && r.status.observedGeneration !== r.generation) {
    return 'Stale';
  }
  // An AnalysisRun's status counts only for its spec (none yet: no phase).
  if (r.kind === 'AnalysisRun' && (!r.status || r.status.observedGeneration !== r.generation)) {
    return r.status ? 'Stale' : '';
  }
  return str(r.phase || (r.status && r.status.phase));
}
