// The live view of slurmops: polls the daemon's /api/v1/cluster and draws it. Every value is set
// as text (textContent), never as markup: names, reasons and messages come from git, Slurm users
// and Kubernetes.
'use strict';

const API = '/api/v1/cluster';
const EVERY_MS = 2000;
let token = sessionStorage.getItem('slurmops-token') || '';
let shownTag = null;
let last = null;

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function add(parent, ...children) {
  for (const c of children) if (c) parent.appendChild(c);
  return parent;
}

function short(commit) {
  return commit ? String(commit).slice(0, 12) : '—';
}

// Seconds from now to UNIX time T, in words: "in 4m", "12s ago".
function rel(t) {
  if (t === undefined || t === null) return '';
  const d = Math.round(t - Date.now() / 1000);
  const a = Math.abs(d);
  if (a < 2) return 'just now';
  const w = a < 90 ? a + 's' : a < 5400 ? Math.round(a / 60) + 'm' : a < 172800 ? Math.round(a / 3600) + 'h' : Math.round(a / 86400) + 'd';
  return d >= 0 ? 'in ' + w : w + ' ago';
}

function since(rfc3339) {
  const t = Date.parse(rfc3339);
  return Number.isNaN(t) ? '' : rel(t / 1000);
}

function clock(t) {
  if (t === undefined || t === null) return '';
  return new Date(t * 1000).toISOString().replace('T', ' ').slice(0, 16) + 'Z';
}

function section(title, count) {
  const s = el('section', 'card');
  const h = add(el('h2'), el('span', null, title));
  if (count !== undefined) add(h, el('span', 'count', count));
  return add(s, h);
}

function badge(text, kind) {
  return el('span', 'badge ' + kind, text);
}

function slurmBadge(slurm) {
  if (slurm.state === 'off') return badge('off', 'info');
  return slurm.reachable ? badge('reachable', 'ok') : badge('unreachable', 'bad');
}

function verdictKind(result) {
  if (result === 'applied') return 'ok';
  if (result === 'suspended' || result === '') return 'warn';
  return 'bad';
}

function summary(v) {
  const s = el('section', 'summary');
  const pending = v.lastSeenCommit && v.lastSeenCommit !== v.lastAppliedCommit;
  const facts = [
    ['result', add(el('span'), badge(v.result || 'no result yet', verdictKind(v.result)))],
    ['applied', el('code', null, short(v.lastAppliedCommit))],
    ['pending', pending ? el('code', 'warn-text', short(v.lastSeenCommit)) : el('span', 'muted', 'none')],
    ['Slurm', slurmBadge(v.slurm)],
    ['branch', el('span', null, v.branch)],
    ['last pass', el('span', null, since(v.lastAttempt))],
    ['last fetch', el('span', null, since(v.lastFetch))],
  ];
  for (const [k, val] of facts) add(s, add(el('div', 'fact'), el('span', 'key', k), val));
  return s;
}

function lines(title, items, cls) {
  if (!items || items.length === 0) return null;
  const s = section(title, items.length);
  const ul = el('ul', 'lines ' + (cls || ''));
  for (const l of items) add(ul, el('li', null, l));
  return add(s, ul);
}

function nodeSetState(p) {
  if (p.canary && p.canary.stage === 'failed') return ['canary failed', 'bad'];
  if (p.done) return ['up to date', 'ok'];
  if (p.window) return ['waits for a window', 'warn'];
  if (p.waiting.length) return ['waits for ' + p.waiting.length + ' worker' + (p.waiting.length > 1 ? 's' : ''), 'warn'];
  if (p.canary) return ['canary ' + p.canary.stage, 'info'];
  return ['rolling', 'info'];
}

function nodeSets(v) {
  const ps = v.nodeSets || [];
  const s = section('NodeSets', ps.length);
  if (ps.length === 0) return add(s, el('p', 'muted', 'No NodeSet reported yet.'));
  const t = el('table', 'grid sets');
  add(t, add(el('thead'), add(el('tr'), ...['NodeSet', 'revision', 'updated', 'state', 'in flight'].map((h) => el('th', null, h)))));
  const body = el('tbody');
  for (const p of ps) {
    const [state, kind] = nodeSetState(p);
    const bar = el('div', 'bar');
    const fill = add(bar, el('div', 'fill'));
    fill.style.width = (p.replicas ? Math.round((100 * p.updated) / p.replicas) : 100) + '%';
    const tr = add(el('tr'),
      add(el('td'), el('strong', null, p.node_set)),
      add(el('td'), el('code', null, p.revision || '—')),
      add(el('td', 'updated'), add(el('div', 'num'), el('span', null, p.updated + ' / ' + p.replicas)), bar),
      add(el('td'), badge(state, kind)),
      el('td', 'muted', (p.in_flight || []).join(', ') || '—'));
    add(body, tr);
  }
  return add(s, add(t, body));
}

function waiting(v) {
  const rows = [];
  for (const p of v.nodeSets || []) for (const w of p.waiting || []) rows.push([p.node_set, w]);
  if (rows.length === 0) return null;
  const now = Date.now() / 1000;
  const s = section('Workers waiting for jobs', rows.length);
  const ul = el('ul', 'waits');
  for (const [set, w] of rows) {
    const li = el('li', 'wait');
    add(li, add(el('div', 'head'), el('strong', null, w.node), el('span', 'muted', set + ' · ' + w.why),
      w.since ? el('span', 'muted', 'drained ' + rel(w.since)) : null));
    const ends = w.jobs.map((j) => j.end).filter((e) => e);
    const horizon = Math.max(now + 60, ...ends);
    for (const j of w.jobs) {
      const job = add(el('div', 'job'), el('code', 'job-id', 'job ' + j.id), el('span', null, j.user),
        el('span', 'muted', j.end ? 'ends ' + rel(j.end) + ' (' + clock(j.end) + ')' : 'no expected end'));
      const track = el('div', 'track');
      const span = add(track, el('div', 'span'));
      span.style.width = (j.end ? Math.max(2, Math.round((100 * (j.end - now)) / (horizon - now))) : 100) + '%';
      if (!j.end) span.classList.add('open');
      add(li, job, track);
    }
    add(ul, li);
  }
  return add(s, ul);
}

function canaries(v) {
  const cs = (v.nodeSets || []).filter((p) => p.canary);
  if (cs.length === 0) return null;
  const s = section('Canaries', cs.length);
  for (const p of cs) {
    const c = p.canary;
    const kind = c.stage === 'failed' ? 'bad' : c.stage === 'passed' || c.stage === 'resumed' ? 'ok' : 'info';
    const d = add(el('div', 'canary'), add(el('div', 'head'), el('strong', null, p.node_set), badge(c.stage, kind),
      el('span', 'muted', (c.canaries || []).join(', '))));
    if (c.jobs && c.jobs.length) add(d, el('div', null, 'validation job ' + c.jobs.join(', ')));
    if (c.deadline) add(d, el('div', 'muted', 'judged at the latest ' + rel(c.deadline)));
    if (c.error) add(d, el('div', 'bad-text', c.error));
    if (c.tail) add(d, el('pre', 'tail', c.tail));
    add(s, d);
  }
  return s;
}

function windows(v) {
  const ws = (v.nodeSets || []).filter((p) => p.window);
  if (ws.length === 0) return null;
  const s = section('Maintenance windows', ws.length);
  for (const p of ws) {
    const w = p.window;
    const d = add(el('div', 'window'), el('strong', null, p.node_set),
      el('div', null, w.opens ? 'opens ' + rel(w.opens) + ' (' + clock(w.opens) + (w.zone ? ', ' + w.zone : '') + ')' : 'no window named'),
      w.closes ? el('div', 'muted', 'closes ' + clock(w.closes)) : null,
      el('div', 'muted', (w.workers || []).length + ' worker(s) wait: ' + (w.workers || []).join(', ')),
      w.reservation ? el('div', null, 'reservation: ' + w.reservation) : null);
    add(s, d);
  }
  return s;
}

function checks(v) {
  const rows = [];
  for (const p of v.nodeSets || []) for (const c of p.checks || []) rows.push([p.node_set, c]);
  if (rows.length === 0) return null;
  const s = section('Active checks', rows.length);
  const t = el('table', 'grid');
  add(t, add(el('thead'), add(el('tr'), ...['NodeSet', 'check', 'passed', 'failed', 'running', 'waiting', 'next'].map((h) => el('th', null, h)))));
  const body = el('tbody');
  for (const [set, c] of rows) {
    add(body, add(el('tr'), el('td', null, set), el('td', null, c.check), el('td', null, c.passed),
      el('td', c.failed ? 'bad-text' : null, c.failed), el('td', null, c.running), el('td', null, c.waiting),
      el('td', 'muted', c.next ? rel(c.next) : '')));
    for (const f of c.failures || []) {
      const cell = el('td', 'bad-text', f);
      cell.colSpan = 6;
      add(body, add(el('tr', 'failure'), el('td'), cell));
    }
  }
  return add(s, add(t, body));
}

function events(v) {
  const es = v.events || [];
  if (es.length === 0) return null;
  const s = section('Recent events', es.length);
  const ul = el('ul', 'events');
  for (const e of es) {
    add(ul, add(el('li', e.type === 'Warning' ? 'warning' : null),
      el('span', 'muted when', since(e.at)),
      badge(e.reason + (e.count > 1 ? ' ×' + e.count : ''), e.type === 'Warning' ? 'bad' : 'info'),
      el('span', 'object', e.object),
      el('span', 'message', e.message)));
  }
  return add(s, ul);
}

function draw(v) {
  document.getElementById('cluster').textContent = v.cluster || v.namespace;
  document.title = 'slurmops · ' + (v.cluster || v.namespace) + ' · ' + (v.result || 'no result');
  const app = document.getElementById('app');
  const f = document.createDocumentFragment();
  add(f, summary(v));
  add(f, lines('Errors', v.errors, 'bad-text'));
  add(f, nodeSets(v), waiting(v), canaries(v), windows(v), checks(v));
  add(f, lines('Held back', v.held), lines('Controllers', v.controllers), lines('slurmrestd', v.slurmrestd));
  add(f, v.slurm.reachable ? null : lines('Slurm', [v.slurm.problem], 'bad-text'));
  add(f, lines('Last apply', v.summary, 'muted'));
  add(f, events(v));
  app.replaceChildren(f);
}

function conn(text, bad) {
  const c = document.getElementById('conn');
  c.textContent = text;
  c.className = bad ? 'bad-text' : 'muted';
}

function askToken(why) {
  const form = document.getElementById('login');
  form.hidden = false;
  document.getElementById('login-error').textContent = why || '';
  document.getElementById('token').focus();
}

async function load() {
  const headers = {};
  if (token) headers.Authorization = 'Bearer ' + token;
  let r;
  try {
    r = await fetch(API, { headers, cache: 'no-cache', credentials: 'omit' });
  } catch (e) {
    conn('the daemon does not answer; retrying', true);
    return;
  }
  if (r.status === 401) {
    askToken(token ? 'That token was refused.' : '');
    conn('needs a token', true);
    return;
  }
  if (!r.ok) {
    conn('the daemon answered ' + r.status + '; retrying', true);
    return;
  }
  document.getElementById('login').hidden = true;
  const tag = r.headers.get('ETag');
  if (tag === null || tag !== shownTag) {
    last = await r.json();
    shownTag = tag;
    draw(last);
  } else if (last) {
    // The same data: only the ages move.
    draw(last);
  }
  conn('live · ' + new Date().toLocaleTimeString(), false);
}

document.addEventListener('DOMContentLoaded', () => {
  document.getElementById('login').addEventListener('submit', (e) => {
    e.preventDefault();
    token = document.getElementById('token').value.trim();
    sessionStorage.setItem('slurmops-token', token);
    load();
  });
  load();
  setInterval(load, EVERY_MS);
});
