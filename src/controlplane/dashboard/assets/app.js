// Exo dashboard: the browser side (docs/dashboard.md is the contract), the
// entry module; app/ holds one ES module per concern. No build step. Every
// string from a cluster or the server goes into the page through
// textContent / DOM APIs, never as HTML.

import { $, clear, el } from './app/dom.js';
import { setupTheme } from './app/theme.js';
import { buildNav, route, setupLogout } from './app/nav.js';
import { pageHead } from './app/page.js';
import { pageOverview } from './app/overview.js';
import { pageDeployment } from './app/deployment.js';
import { pageWaves } from './app/waves.js';
import { pageFleetWaves } from './app/fleet-waves.js';
import { pageStorage } from './app/storage.js';
import { pageAudit } from './app/audit.js';
import { pageShell } from './app/shell.js';
import { pageLane } from './app/lane.js';

function boot() {
  setupTheme();
  const r = route(location.pathname);
  if (r.page === 'login' || document.body.dataset.page === 'login') {
    document.body.dataset.page = 'login';
    document.body.dataset.live = 'closed';
    const token = $('#token');
    if (token && $('#login-error')) token.setAttribute('aria-describedby', 'login-error');
    return;
  }
  document.body.dataset.page = r.page;
  buildNav(r);
  setupLogout();
  const main = $('#main');
  const titles = { overview: 'Fleet', 'fleet-waves': 'Waves across clusters', deployment: r.deployment, waves: 'Waves', storage: 'Storage', audit: 'Audit', shell: 'Shell', lane: `Support lane ${r.lane}` };
  document.title = `${r.deployment && r.page !== 'deployment' ? `${titles[r.page]} · ${r.deployment}` : titles[r.page] || 'Not found'} · Exo`;
  switch (r.page) {
    case 'overview': pageOverview(main); break;
    case 'deployment': pageDeployment(main, r.deployment); break;
    case 'waves': pageWaves(main, r.deployment); break;
    case 'fleet-waves': pageFleetWaves(main); break;
    case 'storage': pageStorage(main, r.deployment); break;
    case 'audit': pageAudit(main, r.deployment); break;
    case 'shell': pageShell(main, r.deployment); break;
    case 'lane': pageLane(main, r.lane); break;
    default:
      document.body.dataset.live = 'closed';
      clear(main).append(pageHead('Not found', null), el('p', null, el('a', { href: '/' }, 'Back to the fleet')));
  }
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', boot);
else boot();
