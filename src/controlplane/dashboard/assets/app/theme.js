// The light/dark theme toggle, kept in this browser (localStorage).

import { $ } from './dom.js';

const THEME_KEY = 'exo-theme';

function storedTheme() {
  try { return localStorage.getItem(THEME_KEY); } catch (_) { return null; }
}

function effectiveDark() {
  const t = document.documentElement.dataset.theme;
  if (t === 'dark') return true;
  if (t === 'light') return false;
  return window.matchMedia('(prefers-color-scheme: dark)').matches;
}

function applyTheme() {
  const t = storedTheme();
  if (t === 'dark' || t === 'light') document.documentElement.dataset.theme = t;
  else delete document.documentElement.dataset.theme;
  const button = $('#theme');
  if (button) {
    const dark = effectiveDark();
    button.setAttribute('aria-pressed', dark ? 'true' : 'false');
    button.textContent = dark ? 'Light mode' : 'Dark mode';
    button.title = 'Toggle dark mode (the choice is kept in this browser)';
  }
}

export function setupTheme() {
  applyTheme();
  const button = $('#theme');
  if (button) {
    button.addEventListener('click', () => {
      const next = effectiveDark() ? 'light' : 'dark';
      try { localStorage.setItem(THEME_KEY, next); } catch (_) { /* private mode */ }
      applyTheme();
    });
  }
  window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', applyTheme);
}
