// Heartbeat ages per deployment, the one state the pages share, and their ticking.

import { formatAge } from './format.js';

// Heartbeat ages: the server's clock is the deployment's last frame time
// plus its age at the time of the answer; keep the skew to ours.
const heartbeats = new Map(); // deployment name -> {atMs, skew}

export function noteHeartbeat(d) {
  if (typeof d.last_frame_at_ms === 'number') {
    const serverNow = typeof d.last_frame_age_ms === 'number'
      ? d.last_frame_at_ms + d.last_frame_age_ms : Date.now();
    heartbeats.set(d.name, { atMs: d.last_frame_at_ms, skew: Date.now() - serverNow });
  } else if (typeof d.last_frame_age_ms === 'number') {
    heartbeats.set(d.name, { atMs: Date.now() - d.last_frame_age_ms, skew: 0 });
  } else {
    heartbeats.set(d.name, null);
  }
}

// A delta or a `heartbeat` event is a frame the server just received:
// the age restarts.
export function frameSeen(name) {
  const h = heartbeats.get(name);
  const skew = h ? h.skew : 0;
  heartbeats.set(name, { atMs: Date.now() - skew, skew });
}

export function heartbeatText(name) {
  const h = heartbeats.get(name);
  if (!h) return 'never';
  return formatAge(Date.now() - h.skew - h.atMs);
}

export function tickHeartbeats() {
  for (const node of document.querySelectorAll('.heartbeat[data-for]')) {
    node.textContent = heartbeatText(node.dataset.for);
  }
}
