// Page skeleton pieces: heading, data table, error line, action status line, state badge.

import { $, clear, el } from './dom.js';

export function setStatus(text, kind) {
  const box = $('#action-status');
  if (!box) return;
  box.className = kind || '';
  box.textContent = text;
}

export function pageHead(title, sub, ...extra) {
  return el('div', { class: 'page-head' },
    el('div', null, el('h1', null, title), sub ? el('p', { class: 'sub' }, sub) : null),
    extra);
}

// A table with a header row: headers are texts or [text, class].
export function dataTable(id, headers) {
  const tbody = el('tbody');
  const cells = headers.map((h) => {
    const [text, cls] = Array.isArray(h) ? h : [h];
    return el('th', { scope: 'col', class: cls }, text);
  });
  const table = el('table', { id }, el('thead', null, el('tr', null, cells)), tbody);
  return { table, tbody };
}

export function showError(container, err) {
  clear(container).append(el('p', { class: 'error', role: 'alert' }, `Could not load: ${err.message}`));
}

export function stateBadge(state) {
  const s = ['online', 'degraded', 'offline'].includes(state) ? state : 'offline';
  return el('span', { class: 'state', dataset: { state: s } }, s);
}
