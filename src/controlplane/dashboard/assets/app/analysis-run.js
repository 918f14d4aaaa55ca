// The Waves page's analysis runs: which run a wave shows, whether its
// status is current, its measurements by check, and its box. The choosing
// and grouping are pure (data in, data out); `analysisBox` builds the DOM.

import { el } from './dom.js';
import { dash, formatTime, str, timeEl } from './format.js';

export const PHASES = ['Running', 'Passed', 'Failed', 'Paused', 'Aborted'];
export const VERDICTS = ['Pass', 'Fail', 'Inconclusive'];

// A run's status, only when it was computed for its spec (the status
// stamps the generation it is for; an older one says nothing now).
export function runStatus(run) {
  const s = run && run.status;
  if (!s || typeof s !== 'object') return null;
  const g = run.generation;
  if (g === undefined || g === null || s.observedGeneration !== g) return null;
  return s;
}

// Why a run shows no status: none written yet, or one for an older spec.
export function staleReason(run) {
  const s = run && run.status;
  if (!s || typeof s !== 'object' || s.observedGeneration === undefined || s.observedGeneration === null) {
    return 'no status for this run yet';
  }
  return `status is for generation ${dash(s.observedGeneration)}, spec is generation ${dash(run.generation)}`;
}

// The run a wave shows: of `runs` (wire resources of any kind), the
// AnalysisRuns of `wave` that judged a release in `releases` (what the
// wave's tenants run), or whose current status rolled the wave back to
// one (after a rollback the tenants run the older release), and that
// judged one of `namespaces` (the tenants' namespaces) when the run names
// its tenants; the newest by creation (then by name). `null` when none.
export function runForWave(runs, wave, releases, namespaces) {
  const rel = new Set(releases);
  const ns = new Set(namespaces);
  const fits = (r) => {
    const spec = r.spec || {};
    if (r.kind !== 'AnalysisRun' || spec.wave !== wave) return false;
    const tenants = Array.isArray(spec.tenants) ? spec.tenants : [];
    if (tenants.length && !tenants.some((t) => t && ns.has(t.namespace))) return false;
    if (rel.has(spec.release)) return true;
    const action = (runStatus(r) || {}).action;
    return Boolean(action && action.kind === 'RolledBack' && action.wave === wave && rel.has(action.release));
  };
  const created = (r) => {
    const t = Date.parse(str(r.creationTimestamp));
    return Number.isNaN(t) ? -Infinity : t;
  };
  let best = null;
  for (const r of runs) {
    if (!fits(r)) continue;
    if (!best || created(r) > created(best) || (created(r) === created(best) && str(r.name) > str(best.name))) best = r;
  }
  return best;
}

// The measurements by check, each check's in slot order: the checks the
// spec names first, in its order, then any other check measured.
export function measurementsByCheck(run) {
  const spec = (run && run.spec) || {};
  const status = runStatus(run) || {};
  const groups = new Map();
  for (const c of Array.isArray(spec.checks) ? spec.checks : []) {
    if (c && c.name) groups.set(str(c.name), []);
  }
  for (const m of Array.isArray(status.measurements) ? status.measurements : []) {
    if (!m || !m.check) continue;
    const name = str(m.check);
    if (!groups.has(name)) groups.set(name, []);
    groups.get(name).push(m);
  }
  for (const list of groups.values()) list.sort((a, b) => (Number(a.slot) || 0) - (Number(b.slot) || 0));
  return [...groups.entries()].map(([check, measurements]) => ({ check, measurements }));
}

// What an outcome did in git, in words.
export function actionText(action) {
  if (!action || typeof action !== 'object') return '';
  const commit = action.commit ? `commit ${str(action.commit).slice(0, 7)}` : 'no commit: git said so already';
  const release = dash(action.release);
  const wave = dash(action.wave);
  if (action.kind === 'Promoted') return `promoted ${release} to ${wave} (${commit})`;
  if (action.kind === 'RolledBack') return `rolled ${wave} back to ${release} (${commit})`;
  return `${dash(action.kind)} ${wave} at ${release} (${commit})`;
}

function measurementCell(m) {
  const verdict = VERDICTS.includes(m.verdict) ? m.verdict : 'Inconclusive';
  const value = typeof m.value === 'number' ? String(Math.round(m.value * 1000) / 1000) : null;
  const lines = [`slot ${dash(m.slot)}: ${verdict}`];
  if (value !== null) lines.push(`value ${value}`);
  if (m.at) lines.push(`at ${formatTime(m.at)}`);
  if (m.detail) lines.push(str(m.detail));
  return el('td', { class: 'measurement', dataset: { verdict, slot: str(m.slot) }, title: lines.join('\n') },
    el('span', { class: 'verdict-label' }, value !== null ? value : verdict.slice(0, 1)));
}

// The box under a wave's table: `id` names its heading.
export function analysisBox(run, id) {
  const spec = run.spec || {};
  const status = runStatus(run);
  const heading = el('h3', { id }, 'Analysis of ', el('span', { class: 'analysis-release' }, dash(spec.release)));
  const head = el('div', { class: 'analysis-head' }, heading);
  const box = el('div', {
    class: 'analysis',
    role: 'group',
    'aria-labelledby': id,
    dataset: { run: str(run.name), namespace: str(run.namespace), phase: status ? str(status.phase) : null, stale: status ? null : 'true' },
  }, head);
  if (!status) {
    const reason = staleReason(run);
    head.append(el('span', { class: 'badge stale analysis-phase', title: reason }, 'stale'));
    box.append(el('p', { class: 'analysis-message muted' }, reason));
    return box;
  }
  const phase = PHASES.includes(status.phase) ? status.phase : str(status.phase);
  head.append(
    el('span', { class: 'analysis-phase', dataset: { phase } }, dash(phase)),
    el('span', { class: 'muted analysis-started' }, 'started ', timeEl(run.creationTimestamp, 'started-at')));
  if (status.finishedAt) head.append(el('span', { class: 'muted' }, 'finished ', timeEl(status.finishedAt, 'finished-at')));
  if (status.message) box.append(el('p', { class: 'analysis-message' }, str(status.message)));
  const groups = measurementsByCheck(run);
  if (groups.length) {
    const width = Math.max(1, ...groups.map((g) => g.measurements.length));
    const tbody = el('tbody');
    for (const g of groups) {
      const tr = el('tr', { class: 'check', dataset: { check: g.check, failing: status.check === g.check ? 'true' : null } },
        el('th', { scope: 'row' }, g.check));
      g.measurements.forEach((m) => tr.append(measurementCell(m)));
      if (g.measurements.length < width) {
        tr.append(el('td', { class: 'measurement-gap muted', colspan: String(width - g.measurements.length) },
          g.measurements.length ? '' : 'not measured yet'));
      }
      tbody.append(tr);
    }
    box.append(el('div', { class: 'table-wrap' },
      el('table', { class: 'measurements', 'aria-label': `Measurements of the ${dash(spec.wave)} analysis` },
        el('thead', null, el('tr', null,
          el('th', { scope: 'col' }, 'Check'),
          el('th', { scope: 'col', colspan: String(width) }, 'Measurements, by slot'))),
        tbody)));
  }
  if (status.action) {
    const kind = status.action.kind === 'RolledBack' ? 'rolled-back' : str(status.action.kind).toLowerCase();
    box.append(el('p', { class: 'analysis-action', dataset: { action: kind } },
      actionText(status.action),
      status.action.at ? el('span', { class: 'muted' }, ' · ', timeEl(status.action.at, 'action-at')) : null));
  }
  return box;
}
