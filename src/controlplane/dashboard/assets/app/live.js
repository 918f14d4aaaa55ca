// The server-sent events client: reconnects with back-off, resyncs, heartbeat frames.

import { $, enc } from './dom.js';
import { getJSON } from './api.js';
import { frameSeen, tickHeartbeats } from './heartbeat.js';

// Opens the events stream; handlers: {event name: fn(data)}, plus
// onResync() called on every reconnect and on `resync`.
export function live(deployment, handlers, onResync) {
  const url = '/api/v1/events' + (deployment ? `?deployment=${enc(deployment)}` : '');
  liveAt(url, '/api/v1/deployments', handlers, onResync);
}

// The same for any events stream at `url`; `probe` is a JSON path the
// session may read, fetched after the stream fails so that an ended
// session goes to the login page.
export function liveAt(url, probe, handlers, onResync) {
  const body = document.body;
  let hellos = 0;
  let retry = 0;
  let source = null;
  let leaving = false;

  const setLive = (state) => {
    body.dataset.live = state;
    const text = $('#live .live-text');
    if (text) text.textContent = state === 'open' ? 'live' : state;
  };

  const open = () => {
    setLive('connecting');
    source = new EventSource(url);
    source.addEventListener('open', () => { retry = 0; setLive('open'); });
    source.addEventListener('error', () => {
      if (leaving) return;
      if (source.readyState === EventSource.CLOSED) {
        // The browser gave up (an HTTP error answer): see whether the
        // session ended, else open a new stream after a back-off.
        setLive('closed');
        getJSON(probe).catch(() => {});
        retry = Math.min(retry + 1, 6);
        setTimeout(open, 1000 * 2 ** retry);
      } else {
        setLive('connecting');
      }
    });
    source.addEventListener('hello', () => {
      setLive('open');
      hellos += 1;
      if (hellos > 1) onResync();
    });
    source.addEventListener('resync', () => onResync());
    // A heartbeat is a frame the server just received: the age restarts.
    source.addEventListener('heartbeat', (ev) => {
      let data;
      try { data = JSON.parse(ev.data); } catch (_) { return; }
      if (data && typeof data.deployment === 'string') {
        frameSeen(data.deployment);
        tickHeartbeats();
      }
    });
    for (const [name, fn] of Object.entries(handlers)) {
      source.addEventListener(name, (ev) => {
        let data;
        try { data = JSON.parse(ev.data); } catch (_) { return; }
        fn(data);
      });
    }
  };
  open();
  const leave = () => { leaving = true; if (source) source.close(); };
  window.addEventListener('pagehide', leave);
  window.addEventListener('beforeunload', () => { leaving = true; });
}
