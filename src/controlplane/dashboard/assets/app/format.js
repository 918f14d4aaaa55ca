// Formatting for display: ages, times, byte sizes, and empty values as "" or "—".

import { el } from './dom.js';

export function formatAge(ms) {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return 'never';
  if (ms < 0) ms = 0;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s ago`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ago`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min ago`;
  return `${Math.floor(h / 24)} days ago`;
}

// An age as `exo fs list` shows it: 45s, 12m, 3h, 2d.
export function formatShortAge(ms) {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '—';
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

function pad(n) { return String(n).padStart(2, '0'); }

export function formatTime(value) {
  if (value === null || value === undefined || value === '') return '';
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return String(value);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function timeEl(value, cls) {
  if (value === null || value === undefined || value === '') return el('span', { class: cls ? `${cls} muted` : 'muted' }, '—');
  const d = new Date(value);
  const iso = Number.isNaN(d.getTime()) ? String(value) : d.toISOString();
  return el('time', { class: cls, datetime: iso, title: iso }, formatTime(value));
}

export function formatBytes(n) {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '?';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${i === 0 ? n : n.toFixed(n < 10 ? 2 : 1)} ${units[i]}`;
}

export const str = (v) => (v === null || v === undefined ? '' : String(v));
export const dash = (v) => (v === null || v === undefined || v === '' ? '—' : String(v));
