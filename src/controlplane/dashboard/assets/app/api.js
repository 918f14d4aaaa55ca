// The JSON API client: GET and CSRF-carrying POST, a 401 sends the browser to the login page.

import { enc } from './dom.js';

export function csrfToken() {
  const meta = document.querySelector('meta[name="exo-csrf"]');
  return meta ? meta.content : '';
}

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// The text of an error answer: {"error": ...} when JSON, else the body.
async function errorText(resp) {
  const text = await resp.text().catch(() => '');
  try {
    const body = JSON.parse(text);
    if (body && typeof body.error === 'string') return body.error;
  } catch (_) { /* not JSON */ }
  return text.trim() || `${resp.status} ${resp.statusText}`;
}

// The login page sends the browser back here (`next`, a local path).
function toLogin() {
  if (location.pathname !== '/login') {
    location.assign(`/login?next=${enc(location.pathname + location.search)}`);
  }
}

async function request(path, options = {}) {
  const resp = await fetch(path, { credentials: 'same-origin', cache: 'no-store', ...options });
  if (resp.status === 401) {
    toLogin();
    throw new HttpError(401, 'not logged in');
  }
  return resp;
}

export async function getJSON(path) {
  const resp = await request(path, { headers: { Accept: 'application/json' } });
  if (!resp.ok) throw new HttpError(resp.status, await errorText(resp));
  return resp.json();
}

// A state-changing request: CSRF header, JSON body. Resolves to
// {ok, status, body, error}; body is the parsed JSON when there is one.
export async function postJSON(path, payload) {
  const resp = await request(path, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json',
      'X-CSRF-Token': csrfToken(),
    },
    body: payload === undefined ? '{}' : JSON.stringify(payload),
  });
  const text = await resp.text().catch(() => '');
  let body = null;
  const json = (resp.headers.get('Content-Type') || '').includes('json');
  if (json) {
    try { body = JSON.parse(text); } catch (_) { body = null; }
  }
  let error = null;
  if (!resp.ok || (body && body.ok === false)) {
    error = (body && typeof body.error === 'string' && body.error) ||
      text.trim() || `${resp.status} ${resp.statusText}`;
  }
  return { ok: resp.ok && !error, status: resp.status, body, error };
}
