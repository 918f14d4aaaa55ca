// The Waves page's pieces: wave order, a step's label and cell, whether a Rollout's status is current.

import { el } from './dom.js';
import { formatTime, str } from './format.js';

const WAVE_ORDER = ['canary', 'low-risk', 'fleet'];
export function compareWave(a, b) {
  const ia = WAVE_ORDER.indexOf(a); const ib = WAVE_ORDER.indexOf(b);
  if (ia >= 0 || ib >= 0) return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib);
  return a < b ? -1 : a > b ? 1 : 0;
}

export const STEP_STATES = ['done', 'running', 'pending', 'waiting', 'failed'];

// A step's label on two lines, the verb shortened: `verified/agent-runtime`
// -> "verify" over "agent-runtime", `pods-rolled/broker` -> "roll" over
// "broker", `configmaps-published` -> "publish" over "configmaps"; the
// full name stays in data-step and the title.
const VERB_SHORT = {
  'pods-rolled': 'roll', repointed: 'repoint', verified: 'verify', published: 'publish',
  isolated: 'isolate', projected: 'project', pruned: 'prune',
};
function stepLabel(name) {
  const n = str(name);
  const slash = n.indexOf('/');
  if (slash > 0) {
    const verb = n.slice(0, slash);
    return { verb: VERB_SHORT[verb] || verb, target: n.slice(slash + 1) };
  }
  const hyphen = n.lastIndexOf('-');
  if (hyphen > 0) {
    const verb = n.slice(hyphen + 1);
    return { verb: VERB_SHORT[verb] || verb, target: n.slice(0, hyphen) };
  }
  return { verb: '', target: n };
}

export function rolloutIsCurrent(r) {
  const status = r.status || {};
  const spec = r.spec || {};
  if (!r.status) return false;
  return r.generation !== undefined && r.generation !== null &&
    status.observedGeneration === r.generation &&
    typeof status.desiredHash === 'string' && status.desiredHash === spec.desiredHash;
}

export function stepCell(step, index) {
  const rawState = str(step.state).toLowerCase();
  const state = STEP_STATES.includes(rawState) ? rawState : 'pending';
  const { verb, target } = stepLabel(step.name);
  const lines = [`${str(step.name)}: ${state}`];
  if (step.owner) lines.push(`owner: ${step.owner}`);
  if (step.startedAt) lines.push(`started: ${formatTime(step.startedAt)}`);
  if (step.finishedAt) lines.push(`finished: ${formatTime(step.finishedAt)}`);
  if (step.message) lines.push(str(step.message));
  const td = el('td', {
    class: index === 0 ? 'step first' : 'step',
    dataset: { step: str(step.name), state },
    title: state === 'failed' && step.message ? str(step.message) : lines.join('\n'),
  },
  el('div', { class: 'chip' },
    verb ? el('span', { class: 'verb' }, verb) : null,
    el('span', { class: 'target' }, target),
    el('span', { class: 'state-label' }, ` ${state}`)));
  if (state === 'failed' && step.message) {
    td.append(el('span', { class: 'message' }, str(step.message)));
  } else if (state === 'waiting' && step.message) {
    td.dataset.hint = str(step.message);
  }
  return td;
}
