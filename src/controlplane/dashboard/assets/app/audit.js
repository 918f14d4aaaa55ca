// The Audit page: a deployment's audit records, newest first, paged, the first page live.

import { clear, el, enc } from './dom.js';
import { getJSON } from './api.js';
import { str, timeEl } from './format.js';
import { live } from './live.js';
import { dataTable, pageHead, showError } from './page.js';

export function pageAudit(main, deployment) {
  const params = new URLSearchParams(location.search);
  const before = params.get('before');
  const { table, tbody } = dataTable('audit', [
    'Time', 'Source', 'Actor', 'Action', 'Target', 'Outcome', 'Detail',
  ]);
  const pager = el('div', { class: 'pager' });
  const sub = el('p', { class: 'sub' }, before ? `Older records, before #${before}` : 'Newest first');
  clear(main).append(pageHead(`Audit · ${deployment}`, null, sub), el('div', { class: 'card table-wrap' }, table), pager);
  const seen = new Set();

  const row = (a) => {
    const detail = a.detail === null || a.detail === undefined ? '' :
      (typeof a.detail === 'string' ? a.detail : JSON.stringify(a.detail));
    const outcome = str(a.outcome);
    const okish = outcome === 'ok' || outcome === 'registered' || outcome.startsWith('exited: 0');
    return el('tr', { dataset: { id: str(a.id), action: str(a.action) } },
      el('td', { class: 'nowrap' }, timeEl(typeof a.at_ms === 'number' ? a.at_ms : null)),
      el('td', null, str(a.source)),
      el('td', null, str(a.actor)),
      el('th', { scope: 'row', class: 'mono' }, str(a.action)),
      el('td', { class: 'mono' }, str(a.target)),
      el('td', { class: 'outcome', dataset: { ok: okish ? 'true' : (outcome.startsWith('failed') || outcome.includes('refused') || outcome.includes('timed out') || outcome.includes('lost') ? 'false' : 'other') } }, outcome),
      el('td', { class: 'detail', title: detail || null }, detail));
  };

  const load = async () => {
    const q = new URLSearchParams({ limit: '50' });
    if (before) q.set('before', before);
    try {
      const res = await getJSON(`/api/v1/deployments/${enc(deployment)}/audit?${q}`);
      // newest first, whatever order the page comes in
      const list = (Array.isArray(res.audit) ? res.audit : []).slice().sort((x, y) => y.id - x.id);
      clear(tbody);
      seen.clear();
      for (const a of list) { seen.add(a.id); tbody.append(row(a)); }
      if (!list.length) tbody.append(el('tr', null, el('td', { colspan: '7', class: 'empty' }, 'No audit records.')));
      clear(pager);
      if (before) pager.append(el('a', { id: 'newest', href: location.pathname }, '« Newest'));
      if (res.next_before !== null && res.next_before !== undefined) {
        pager.append(el('a', { id: 'older', href: `?before=${enc(String(res.next_before))}` }, 'Older »'));
      }
    } catch (err) {
      if (err.status !== 401) showError(pager, err);
    }
  };

  load();
  live(deployment, {
    audit: (a) => {
      // only the first page grows live; older pages are history
      if (before || !a || a.deployment !== deployment || seen.has(a.id)) return;
      seen.add(a.id);
      const placeholder = tbody.querySelector('td.empty');
      if (placeholder) placeholder.closest('tr').remove();
      tbody.insertBefore(row(a), tbody.firstChild);
    },
  }, load);
}
