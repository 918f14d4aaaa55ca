// The Shell page: xterm.js (loaded on demand) on an agent's pod through the attach WebSocket.

import { clear, el, enc } from './dom.js';
import { live } from './live.js';
import { deploymentSummary } from './resources.js';
import { cspStyleBridge } from './style-bridge.js';

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const s = el('script', { src });
    s.addEventListener('load', resolve);
    s.addEventListener('error', () => reject(new Error(`could not load ${src}`)));
    document.head.append(s);
  });
}

function loadStylesheet(href) {
  return new Promise((resolve) => {
    const l = el('link', { rel: 'stylesheet', href });
    l.addEventListener('load', resolve);
    l.addEventListener('error', resolve);
    document.head.append(l);
  });
}

export function pageShell(main, deployment) {
  const summary = deploymentSummary(deployment);
  const params = new URLSearchParams(location.search);
  const namespace = params.get('namespace') || '';
  const agent = params.get('agent') || '';
  const status = el('span', { id: 'shell-status', role: 'status', 'aria-live': 'polite', dataset: { state: 'connecting' } }, 'Loading the terminal…');
  const again = el('button', { type: 'button', id: 'reconnect', hidden: true }, 'Connect again');
  const term = el('div', { id: 'terminal', 'aria-label': `terminal on ${namespace}/${agent}` });
  clear(main).append(
    el('div', { class: 'shell-bar' },
      el('h1', null, `Shell · ${namespace}/${agent}`),
      el('span', { class: 'muted' }, `on ${deployment}`),
      status, again),
    summary.box,
    term);
  summary.load().catch(() => {});
  live(deployment, { deployment: summary.render }, () => summary.load().catch(() => {}));

  const say = (text, state) => { status.textContent = text; status.dataset.state = state; };

  if (!namespace || !agent) {
    say('This page needs ?namespace=…&agent=… (open it from the deployment page).', 'ended');
    return;
  }

  Promise.all([
    loadStylesheet('/assets/vendor/xterm.css'),
    loadScript('/assets/vendor/xterm.js').then(() => loadScript('/assets/vendor/addon-fit.js')),
  ]).then(() => {
    const Terminal = window.Terminal;
    const FitAddon = window.FitAddon && window.FitAddon.FitAddon;
    if (typeof Terminal !== 'function' || typeof FitAddon !== 'function') throw new Error('xterm.js did not load');
    cspStyleBridge(term);
    const terminal = new Terminal({
      cursorBlink: true,
      convertEol: false,
      fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace',
      fontSize: 14,
      scrollback: 5000,
      theme: { background: '#0d1117', foreground: '#e6edf3', cursor: '#e6edf3', selectionBackground: '#264f78' },
    });
    const fit = new FitAddon();
    terminal.loadAddon(fit);
    terminal.open(term);
    try { fit.fit(); } catch (_) { /* not laid out yet */ }
    connect(terminal, fit);
    new ResizeObserver(() => { try { fit.fit(); } catch (_) { /* hidden */ } }).observe(term);
  }).catch((err) => say(`Could not start the terminal: ${err.message}`, 'ended'));

  let socket = null;
  let disposers = [];

  const connect = (terminal, fit) => {
    disposers.forEach((d) => d.dispose());
    disposers = [];
    again.hidden = true;
    const q = new URLSearchParams({
      namespace, agent, tty: 'true',
      cols: String(terminal.cols), rows: String(terminal.rows), actor: 'dashboard',
    });
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(`${scheme}//${location.host}/api/v1/deployments/${enc(deployment)}/attach?${q}`);
    ws.binaryType = 'arraybuffer';
    socket = ws;
    let reason = null;
    const encoder = new TextEncoder();
    say(`Connecting to ${namespace}/${agent}…`, 'connecting');

    ws.addEventListener('open', () => {
      say(`Connected to ${namespace}/${agent}`, 'open');
      terminal.focus();
    });
    ws.addEventListener('message', (ev) => {
      if (typeof ev.data === 'string') {
        let msg = null;
        try { msg = JSON.parse(ev.data); } catch (_) { /* not JSON */ }
        if (msg && typeof msg.reason === 'string') {
          reason = msg.reason;
          say(`Session ended: ${reason}`, 'ended');
          terminal.write(`\r\n\x1b[2m[session ended: ${reason.replace(/[\x00-\x1f\x7f]/g, ' ')}]\x1b[0m\r\n`);
        } else {
          terminal.write(ev.data);
        }
      } else {
        terminal.write(new Uint8Array(ev.data));
      }
    });
    ws.addEventListener('close', (ev) => {
      if (socket !== ws) return;
      if (reason === null) {
        const why = ev.reason || (ev.code === 1006 ? 'connection failed or was refused (is the deployment online?)' : `closed (${ev.code})`);
        say(`Session ended: ${why}`, 'ended');
        terminal.write(`\r\n\x1b[2m[${why}]\x1b[0m\r\n`);
      }
      again.hidden = false;
    });
    const send = (data) => { if (ws.readyState === WebSocket.OPEN) ws.send(data); };
    disposers.push(terminal.onData((data) => send(encoder.encode(data))));
    disposers.push(terminal.onBinary((data) => {
      const bytes = new Uint8Array(data.length);
      for (let i = 0; i < data.length; i += 1) bytes[i] = data.charCodeAt(i) & 0xff;
      send(bytes);
    }));
    disposers.push(terminal.onResize(({ cols, rows }) => send(JSON.stringify({ resize: { cols, rows } }))));
    again.onclick = null;
    again.addEventListener('click', () => { terminal.reset(); try { fit.fit(); } catch (_) { /* */ } connect(terminal, fit); }, { once: true });
  };

  window.addEventListener('pagehide', () => { if (socket) socket.close(1000, 'closed by the user'); });
}
