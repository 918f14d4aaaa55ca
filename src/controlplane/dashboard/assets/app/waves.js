// The Waves page: one row per tenant, one cell per saga step, grouped by
// wave; under each wave, its analysis run for the release its tenants run.

import { $, clear, el } from './dom.js';
import { dash, formatTime, str, timeEl } from './format.js';
import { live } from './live.js';
import { pageHead, showError } from './page.js';
import { deploymentSummary, resourceSet } from './resources.js';
import { STEP_STATES, compareWave, rolloutIsCurrent, stepCell } from './saga-steps.js';
import { analysisBox, runForWave } from './analysis-run.js';

export function pageWaves(main, deployment) {
  const summary = deploymentSummary(deployment);
  const body = el('div', { id: 'waves' }, el('p', { class: 'muted' }, 'Loading…'));
  const legend = el('ul', { class: 'legend', 'aria-label': 'Legend' },
    STEP_STATES.map((s) => el('li', null, el('span', { class: 'swatch', dataset: { state: s }, 'aria-hidden': 'true' }), s)),
    el('li', null, el('span', { class: 'swatch stale', 'aria-hidden': 'true' }), 'stale (status computed for an older spec)'));
  clear(main).append(pageHead(`Waves · ${deployment}`, 'One row per tenant; one cell per saga step, in the tenant’s order; the wave’s analysis below its tenants.'), legend, body);
  $('.page-head', main).append(summary.box);

  const render = () => {
    const all = [...set.map.values()];
    const rollouts = all.filter((r) => r.kind === 'Rollout');
    const runs = all.filter((r) => r.kind === 'AnalysisRun');
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
      const releases = [...new Set(list.map((r) => str(r.spec && r.spec.release)).filter(Boolean))];
      const run = runForWave(runs, wave, releases, list.map((r) => str(r.namespace)));
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
            tbody)),
        run ? analysisBox(run, `wave-${waveIndex}-analysis`) : null));
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
