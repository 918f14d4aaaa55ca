// Routing (path -> page and deployment), the page navigation and the logout button.

import { $, clear, el, enc } from './dom.js';
import { csrfToken, postJSON } from './api.js';
import { setStatus } from './page.js';

export function route(pathname) {
  if (pathname === '/' || pathname === '') return { page: 'overview' };
  if (pathname === '/login') return { page: 'login' };
  if (pathname === '/fleet/waves' || pathname === '/fleet/waves/') return { page: 'fleet-waves' };
  const lane = pathname.match(/^\/lanes\/([a-z0-9-]{1,63})\/?$/);
  if (lane) return { page: 'lane', lane: lane[1] };
  const m = pathname.match(/^\/deployments\/([^/]+)(?:\/(waves|storage|audit|shell))?\/?$/);
  if (!m) return { page: 'notfound' };
  let name;
  try { name = decodeURIComponent(m[1]); } catch (_) { return { page: 'notfound' }; }
  return { page: m[2] || 'deployment', deployment: name };
}

export function buildNav(r) {
  const nav = $('#nav');
  if (!nav) return;
  clear(nav);
  const link = (href, text, current) =>
    el('a', { href, 'aria-current': current ? 'page' : null }, text);
  if (r.page === 'lane') {
    // A lane's token reaches this page only: no link to the fleet.
    nav.append(link(location.pathname, `Support lane · ${r.lane}`, true));
    return;
  }
  nav.append(link('/', 'Fleet', r.page === 'overview'));
  if (!r.deployment) {
    nav.append(link('/fleet/waves', 'Waves across clusters', r.page === 'fleet-waves'));
    return;
  }
  const base = `/deployments/${enc(r.deployment)}`;
  nav.append(
    el('span', { class: 'nav-sep', 'aria-hidden': 'true' }, '›'),
    el('span', { class: 'nav-deployment' }, r.deployment),
    link(base, 'Workloads', r.page === 'deployment'),
    link(`${base}/waves`, 'Waves', r.page === 'waves'),
    el('span', { class: 'nav-group' }, 'Infrastructure:'),
    link(`${base}/storage`, 'Storage', r.page === 'storage'),
    link(`${base}/audit`, 'Audit', r.page === 'audit'),
  );
  if (r.page === 'shell') {
    nav.append(link(location.pathname + location.search, 'Shell', true));
  }
}

// Only a session (cookie) has a CSRF token: without one there is nothing
// to log out of (open dashboard, or a Bearer client).
export function setupLogout() {
  const button = $('#logout');
  if (!button) return;
  if (!csrfToken()) { button.hidden = true; return; }
  button.addEventListener('click', async () => {
    button.disabled = true;
    try {
      const res = await postJSON('/logout');
      if (!res.ok && res.status !== 401) {
        setStatus(`Log out failed: ${res.error}`, 'failed');
        button.disabled = false;
        return;
      }
    } catch (err) {
      if (err.status !== 401) {
        setStatus(`Log out failed: ${err.message}`, 'failed');
        button.disabled = false;
        return;
      }
    }
    location.assign('/login');
  });
}
