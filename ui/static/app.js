// The mvq jobs console: plain JavaScript over the mvq HTTP API, no build
// step. The token lives in sessionStorage and goes out as a Bearer header;
// job events are read from GET /v1/job/{id}/events with fetch() and a
// streamed body (EventSource cannot send an Authorization header).
'use strict';

const TERMINAL = new Set(['DONE', 'FAILED', 'CANCELLED']);
// Browsers open about six HTTP/1.1 connections per host: the list follows
// at most this many unfinished jobs live and refreshes the rest by polling.
const MAX_LIST_STREAMS = 3;
const POLL_MS = 3000;

const $ = (id) => document.getElementById(id);
let config = { trace_url_template: '' };
const streams = new Map(); // job id -> AbortController
let pageJob = null;        // the job shown on the job page
let pollTimer = null;

function token() { return sessionStorage.getItem('mvq.token') || ''; }

function headers(extra) {
  const h = Object.assign({ 'Accept': 'application/json' }, extra || {});
  const t = token();
  if (t) h['Authorization'] = 'Bearer ' + t;
  return h;
}

// api calls the API and returns the decoded JSON body; a problem body
// becomes an Error with its title and detail.
async function api(method, path, body) {
  const opts = { method, headers: headers(body !== undefined ? { 'Content-Type': 'application/json' } : {}) };
  if (body !== undefined) opts.body = JSON.stringify(body);
  const resp = await fetch(path, opts);
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!resp.ok) {
    let msg = resp.status + ' ' + resp.statusText;
    if (data && (data.title || data.detail)) msg = (data.title || '') + ': ' + (data.detail || '');
    if (resp.status === 401) msg += ' — paste a valid token above';
    const err = new Error(msg);
    err.status = resp.status;
    throw err;
  }
  return data;
}

function showError(err) {
  const box = $('error');
  if (!err) { box.hidden = true; box.textContent = ''; return; }
  box.hidden = false;
  box.textContent = String(err.message || err);
}

function viewPath(view) {
  return '/v1/materialized_view/' + encodeURIComponent(view).replace(/%24/g, '$');
}

function fmtTime(s) {
  if (!s) return '—';
  const d = new Date(s);
  return isNaN(d) ? s : d.toLocaleString();
}

function progressOf(job) {
  const p = job.progress || {};
  const total = p.work_items_total || 0, done = p.work_items_done || 0;
  let frac = total > 0 ? done / total : 0;
  if (job.state === 'DONE') frac = 1;
  return { total, done, frac, read: p.rows_read || 0, written: p.rows_written || 0 };
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v; else if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

function stateBadge(state) {
  return el('span', { class: 'state state-' + state, text: state });
}

// shortID is the distinctive tail of a job id: a UUIDv7 starts with its
// timestamp, so ids of one minute share their first 12 characters; the
// last 12 are random. The whole id is the element's title.
function shortID(id) {
  return id.length > 13 ? '…' + id.slice(-12) : id;
}

function jobIDCode(id) {
  return el('code', { class: 'job-id', title: id, text: shortID(id) });
}

function fmtSeconds(s) {
  if (s === null || s === undefined || isNaN(s)) return '—';
  if (s < 1) return Math.round(s * 1000) + ' ms';
  if (s < 120) return (Math.round(s * 10) / 10) + ' s';
  if (s < 7200) return Math.round(s / 60) + ' min';
  if (s < 172800) return (Math.round(s / 360) / 10) + ' h';
  return (Math.round(s / 8640) / 10) + ' d';
}

function jobHash(id) { return '#/job/' + encodeURIComponent(id); }

// ---- list page --------------------------------------------------------

const jobsById = new Map();

function jobRow(job) {
  const pr = progressOf(job);
  const bar = el('progress', { max: '1', value: String(pr.frac) });
  const tr = el('tr', { class: 'job-row', 'data-job-id': job.job_id, 'data-state': job.state },
    el('td', {}, jobIDCode(job.job_id)),
    el('td', { text: job.view }),
    el('td', { class: 'job-state' }, stateBadge(job.state)),
    el('td', { text: job.phase || '' }),
    el('td', {}, bar, ' ' + pr.done + '/' + pr.total),
    el('td', { text: job.cause || '' }),
    el('td', { text: fmtTime(job.created_at) }));
  tr.addEventListener('click', () => { location.hash = jobHash(job.job_id); });
  return tr;
}

function renderJobs() {
  const list = [...jobsById.values()].sort((a, b) => (b.created_at || '').localeCompare(a.created_at || ''));
  const tbody = $('jobs').querySelector('tbody');
  tbody.replaceChildren(...list.map(jobRow));
  $('jobs-empty').hidden = list.length > 0;
}

// ---- views from the catalog ------------------------------------------

const VIEWS_EVERY = 5; // the catalog is walked every fifth poll
let viewsPolls = 0;

// pages calls a paged list route until it has no page_token and returns
// the concatenated items of key.
async function pages(method, path, body, key) {
  const out = [];
  let tok = '';
  for (let i = 0; i < 100; i++) {
    const b = Object.assign({}, body || {});
    if (tok) b.page_token = tok;
    const data = await api(method, path, b);
    out.push(...((data && data[key]) || []));
    tok = data && data.page_token;
    if (!tok) break;
  }
  return out;
}

// catalogViews walks the namespaces from the root and lists the views of
// each, with their status. A namespace the token may not read is skipped
// and named in skipped.
async function catalogViews() {
  const views = [], skipped = [];
  const queue = [[]];
  while (queue.length && views.length < 2000) {
    const ns = queue.shift();
    const id = ns.length ? ns.join('$') : '$';
    try {
      const kids = await pages('POST', '/v1/namespace/' + encodeURIComponent(id).replace(/%24/g, '$') + '/list', {}, 'namespaces');
      for (const k of kids) queue.push(ns.concat([k]));
    } catch (err) {
      if (err.status === 401) throw err;
      skipped.push(id);
    }
    if (!ns.length) continue; // views live in namespaces
    try {
      views.push(...await pages('POST', '/v1/materialized_view/list', { namespace: id }, 'views'));
    } catch (err) {
      if (err.status === 401) throw err;
      skipped.push(id);
    }
  }
  return { views, skipped: [...new Set(skipped)] };
}

function lagText(v) {
  if (!v.sources || !v.sources.length) return '—';
  if (!v.stale && !v.lag_versions) return 'fresh';
  return v.lag_versions + ' version' + (v.lag_versions === 1 ? '' : 's') + ', ' + fmtSeconds(v.lag_seconds);
}

function sourceCell(v) {
  const td = el('td', { class: 'view-source' });
  for (const s of v.sources || []) {
    const line = el('div', {}, el('code', { text: s.table + (s.branch ? '@' + s.branch : '') }));
    if (!s.exists) line.append(' ', el('span', { class: 'warn', text: 'gone' }));
    else line.append(el('span', { class: 'hint', text: ' v' + s.refreshed_version + '/' + s.latest_version }));
    td.append(line);
  }
  return td;
}

function viewRow(v) {
  const btn = el('button', { type: 'button', class: 'refresh-view', 'data-view': v.view, text: 'Refresh' });
  btn.addEventListener('click', () => startRefresh(v.view));
  const last = el('td', { class: 'view-last-job' });
  if (v.last_job) {
    const a = el('a', { href: jobHash(v.last_job.job_id) }, stateBadge(v.last_job.state), ' ', jobIDCode(v.last_job.job_id));
    last.append(a, el('span', { class: 'hint', text: ' ' + (v.last_job.cause || '') }));
  } else {
    last.append(el('span', { class: 'hint', text: 'no jobs' }));
  }
  let sched = v.auto_refresh ? 'on change' : 'manual';
  if (v.refresh_every) sched = 'every ' + v.refresh_every;
  if (v.target_lag) sched = 'within ' + v.target_lag;
  const schedCell = el('td', { class: 'view-schedule', text: sched });
  if (v.suspended) schedCell.append(' ', el('span', { class: 'warn view-suspended', text: 'suspended' }));
  else if ((v.refresh_every || v.target_lag) && v.next_refresh_at) schedCell.append(el('div', { class: 'hint', text: 'next ' + fmtTime(v.next_refresh_at) }));
  const name = el('td', {}, el('span', { text: v.view }));
  if (v.problem) name.append(el('div', { class: 'warn', text: v.problem }));
  return el('tr', { 'data-view': v.view, 'data-kind': v.kind || '' },
    name,
    el('td', { class: 'view-kind', text: v.kind || '' }),
    sourceCell(v),
    el('td', { class: 'view-lag' + (v.stale ? ' stale' : ''), text: lagText(v) }),
    el('td', { class: 'view-version', text: String(v.version) }),
    schedCell,
    last,
    el('td', {}, btn));
}

async function loadViews() {
  try {
    const { views, skipped } = await catalogViews();
    views.sort((a, b) => a.view.localeCompare(b.view));
    $('views').querySelector('tbody').replaceChildren(...views.map(viewRow));
    $('views-empty').hidden = views.length > 0;
    $('views-skipped').textContent = skipped.length ? 'not readable with this token: ' + skipped.join(', ') : '';
  } catch (err) {
    showError(err);
  }
}

// ---- filters in the URL --------------------------------------------------

// The list page's hash is #/?view=...&state=...; the job page's is
// #/job/{id}. Both survive a reload and can be shared.
function listHash() {
  const q = new URLSearchParams();
  const view = $('filter-view').value.trim(), state = $('filter-state').value;
  if (view) q.set('view', view);
  if (state) q.set('state', state);
  const qs = q.toString();
  return '#/' + (qs ? '?' + qs : '');
}

function filtersFromHash() {
  const m = location.hash.match(/^#\/\?(.*)$/);
  const q = new URLSearchParams(m ? m[1] : '');
  $('filter-view').value = q.get('view') || '';
  $('filter-state').value = q.get('state') || '';
}

let lastListHash = '#/';

function filtersChanged() {
  lastListHash = listHash();
  history.replaceState(null, '', lastListHash);
  loadJobs();
}

async function loadJobs() {
  const body = { limit: 100 };
  const view = $('filter-view').value.trim();
  const state = $('filter-state').value;
  if (view) body.view = view;
  if (state) body.state = state;
  try {
    const data = await api('POST', '/v1/jobs/list', body);
    jobsById.clear();
    for (const j of data.jobs || []) jobsById.set(j.job_id, j);
    renderJobs();
    showError(null);
    followUnfinished();
  } catch (err) {
    showError(err);
  }
}

function followUnfinished() {
  const open = [...jobsById.values()].filter((j) => !TERMINAL.has(j.state));
  for (const [id, ctl] of streams) {
    if (!jobsById.has(id) || TERMINAL.has(jobsById.get(id).state)) { ctl.abort(); streams.delete(id); }
  }
  for (const j of open) {
    if (streams.size >= MAX_LIST_STREAMS) break;
    if (streams.has(j.job_id)) continue;
    const ctl = new AbortController();
    streams.set(j.job_id, ctl);
    follow(j.job_id, ctl.signal, (e) => {
      const cur = jobsById.get(j.job_id);
      if (!cur) return;
      cur.state = e.state; cur.phase = e.phase; cur.progress = e.progress;
      renderJobs();
    }).then(async () => {
      streams.delete(j.job_id);
      try { jobsById.set(j.job_id, await api('GET', '/v1/job/' + encodeURIComponent(j.job_id))); renderJobs(); } catch (e) { /* next poll */ }
    });
  }
  $('live-status').textContent = streams.size ? 'following ' + streams.size + ' job(s) live' : '';
}

async function startRefresh(view, body) {
  try {
    const data = await api('POST', viewPath(view) + '/refresh', body || {});
    showError(null);
    location.hash = jobHash(data.job_id);
  } catch (err) {
    showError(err);
  }
}

// ---- event stream -----------------------------------------------------

// follow reads the job's server-sent events until the stream ends (after
// a terminal state) or signal aborts, resuming with Last-Event-ID when the
// connection drops.
async function follow(id, signal, onEvent) {
  let lastID = '';
  for (let attempt = 0; attempt < 20 && !signal.aborted; attempt++) {
    try {
      const h = headers({ 'Accept': 'text/event-stream' });
      if (lastID) h['Last-Event-ID'] = lastID;
      const resp = await fetch('/v1/job/' + encodeURIComponent(id) + '/events', { headers: h, signal });
      if (!resp.ok) return;
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '', terminal = false;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let data = '';
          for (const line of block.split('\n')) {
            if (line.startsWith('id: ')) lastID = line.slice(4);
            else if (line.startsWith('data: ')) data += line.slice(6);
          }
          if (!data) continue;
          let e;
          try { e = JSON.parse(data); } catch (x) { continue; }
          onEvent(e);
          if (e.type === 'state' && TERMINAL.has(e.state)) terminal = true;
        }
      }
      if (terminal) return;
    } catch (err) {
      if (signal.aborted) return;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

// ---- job page -----------------------------------------------------------

function renderJob(job) {
  $('job-id').textContent = job.job_id;
  $('job-view').textContent = job.view;
  const st = $('job-state');
  st.textContent = job.state;
  st.className = 'state state-' + job.state;
  $('job-phase').textContent = job.phase || '—';
  $('job-created').textContent = fmtTime(job.created_at);
  $('job-finished').textContent = fmtTime(job.finished_at);
  $('job-cause').textContent = (job.cause || '—') +
    (job.trigger ? ' (' + job.trigger.source + ' v' + job.trigger.version + ')' : '');
  $('job-cluster').textContent = job.cluster || '—';
  const t = timing(job);
  $('job-duration').textContent = t.run === null ? '—' : fmtSeconds(t.run) + (TERMINAL.has(job.state) ? '' : ' so far') +
    (t.queued !== null ? ' (queued ' + fmtSeconds(t.queued) + ')' : '');
  const pr0 = progressOf(job);
  $('job-rate').textContent = t.run ? Math.round(pr0.read / t.run) + ' rows/s read, ' + Math.round(pr0.written / t.run) + ' rows/s written' : '—';
  const pr = progressOf(job);
  $('job-progress').value = pr.frac;
  $('job-progress-text').textContent = pr.done + ' / ' + pr.total + ' work items' +
    ((job.progress || {}).work_items_failed ? ', ' + job.progress.work_items_failed + ' failed' : '');
  $('job-rows').textContent = 'rows read ' + pr.read + ', rows written ' + pr.written;
  $('job-result').textContent = job.result ? JSON.stringify(job.result, null, 2) : '—';
  $('job-request').textContent = JSON.stringify(job.request || {}, null, 2);
  const fail = $('job-failure');
  if (job.failure) {
    fail.hidden = false;
    fail.textContent = 'Failed in ' + (job.failure.phase || '?') + ': ' + job.failure.message +
      (job.failure.retryable ? '\n(retryable: a new refresh may succeed)' : '');
  } else {
    fail.hidden = true;
  }
  const link = $('job-trace');
  if (config.trace_url_template && job.trace_id) {
    link.href = config.trace_url_template.split('{trace_id}').join(encodeURIComponent(job.trace_id));
    link.hidden = false;
    $('job-trace-none').textContent = '';
  } else {
    link.hidden = true;
    $('job-trace-none').textContent = job.trace_id ? job.trace_id + ' (set MVQ_TRACE_URL_TEMPLATE for a link)' : '—';
  }
  $('cancel-btn').disabled = TERMINAL.has(job.state);
}

// timing: seconds queued (created to started) and run (started to
// finished, or to now while it runs); null when not known yet.
function timing(job) {
  const c = Date.parse(job.created_at), s = Date.parse(job.started_at || ''), f = Date.parse(job.finished_at || '');
  const end = isNaN(f) ? Date.now() : f;
  return {
    queued: isNaN(s) || isNaN(c) ? null : Math.max(0, (s - c) / 1000),
    run: isNaN(s) ? (isNaN(f) || isNaN(c) ? null : Math.max(0, (f - c) / 1000)) : Math.max(0, (end - s) / 1000),
  };
}

// Milestones are the job's state and phase events (submitted, started,
// planned N work items, committing, done); work item events are counted
// and listed under a collapsed <details>.
let milestones = [], itemEvents = 0;

function resetEvents() {
  milestones = []; itemEvents = 0;
  $('job-milestones').replaceChildren();
  $('job-events').replaceChildren();
  $('job-items-count').textContent = '0 work item events';
}

function addEvent(e) {
  if (!milestones.length && !itemEvents && !(e.type === 'state' && e.state === 'PENDING') && pageJob) {
    // A long job's stream keeps its last 1000 events: the first
    // milestones come from the job record.
    addEvent({ type: 'state', state: 'PENDING', time: pageJob.created_at, message: 'submitted (its first events were trimmed)' });
    if (pageJob.started_at) addEvent({ type: 'state', state: 'RUNNING', time: pageJob.started_at, message: '' });
  }
  const line = fmtTime(e.time) + '  ' + e.state + (e.phase ? ' / ' + e.phase : '') + (e.message ? '  ' + e.message : '');
  if (e.type === 'progress') {
    itemEvents++;
    $('job-items-count').textContent = itemEvents + ' work item event' + (itemEvents === 1 ? '' : 's');
    // Only the list of an open <details> is kept growing.
    if ($('job-items').open) $('job-events').append(el('li', { text: line }));
    return;
  }
  milestones.push(e);
  const prev = milestones.length > 1 ? Date.parse(milestones[milestones.length - 2].time) : NaN;
  const dt = Date.parse(e.time) - prev;
  $('job-milestones').append(el('li', { 'data-type': e.type, 'data-state': e.state },
    el('time', { text: fmtTime(e.time) }), ' ',
    el('strong', { text: milestoneName(e) }),
    e.message && milestoneName(e) !== e.message ? el('span', { class: 'hint', text: ' ' + e.message }) : '',
    isNaN(dt) ? '' : el('span', { class: 'hint', text: ' +' + fmtSeconds(dt / 1000) })));
}

function milestoneName(e) {
  if (e.type === 'phase') return e.message || e.phase;
  switch (e.state) {
    case 'PENDING': return 'submitted';
    case 'RUNNING': return 'started';
    case 'DONE': return 'done';
    case 'FAILED': return 'failed';
    case 'CANCELLED': return 'cancelled';
  }
  return e.state;
}

const allEvents = [];

async function showJob(id) {
  $('list-page').hidden = true;
  $('job-page').hidden = false;
  $('back-link').href = lastListHash;
  resetEvents();
  allEvents.length = 0;
  stopStreams();
  try {
    pageJob = await api('GET', '/v1/job/' + encodeURIComponent(id));
    showError(null);
  } catch (err) {
    showError(err);
    return;
  }
  renderJob(pageJob);
  const ctl = new AbortController();
  streams.set(id, ctl);
  await follow(id, ctl.signal, (e) => {
    if (!pageJob || pageJob.job_id !== id) return;
    allEvents.push(e);
    addEvent(e);
    pageJob.state = e.state; pageJob.phase = e.phase; pageJob.progress = e.progress;
    renderJob(pageJob);
  });
  streams.delete(id);
  if (pageJob && pageJob.job_id === id && !ctl.signal.aborted) {
    try { pageJob = await api('GET', '/v1/job/' + encodeURIComponent(id)); renderJob(pageJob); } catch (err) { showError(err); }
  }
}

async function cancelJob() {
  if (!pageJob) return;
  try {
    pageJob = await api('POST', '/v1/jobs/cancel', { job_id: pageJob.job_id });
    renderJob(pageJob);
    showError(null);
  } catch (err) {
    showError(err);
  }
}

// retryJob submits a new refresh of the job's view with the options of the
// job's request (the ones a refresh request accepts).
function retryJob() {
  if (!pageJob) return;
  const r = pageJob.request || {};
  const body = {};
  for (const k of ['src_version', 'source_task_size', 'concurrency', 'intra_applier_concurrency', 'max_rows_per_fragment']) {
    if (r[k] > 0) body[k] = r[k];
  }
  if (r.output_limit !== undefined && r.output_limit !== null) body.output_limit = r.output_limit;
  if (r.cluster) body.cluster = r.cluster;
  if (r.manifest) body.manifest = r.manifest;
  startRefresh(pageJob.view, body);
}

// ---- operations page ------------------------------------------------------

function poolRow(p) {
  const paused = !!p.paused;
  const btn = el('button', { type: 'button', class: 'pool-toggle', 'data-cluster': p.cluster, text: paused ? 'Resume' : 'Pause' });
  btn.addEventListener('click', () => setPaused(p.cluster, !paused));
  const workers = el('td', { class: 'pool-workers' });
  for (const w of p.workers || []) {
    workers.append(el('div', {}, el('code', { text: w.host + ':' + w.pid }), ' ' + w.busy + '/' + w.concurrency +
      (w.status && w.status !== 'active' ? ' (' + w.status + ')' : '')));
  }
  if (!(p.workers || []).length) workers.append(el('span', { class: 'warn', text: 'none' }));
  return el('tr', { 'data-cluster': p.cluster, 'data-paused': String(paused) },
    el('td', {}, el('code', { text: p.cluster })),
    el('td', {}, el('span', { class: 'state ' + (paused ? 'state-CANCELLED' : 'state-DONE'), text: paused ? 'PAUSED' : 'RUNNING' })),
    el('td', { class: 'pool-pending', text: String(p.pending) }),
    el('td', { text: String(p.active) }),
    el('td', { text: String(p.scheduled) }),
    el('td', { text: String(p.retry) }),
    el('td', { text: p.pending ? fmtSeconds(p.latency_seconds) : '—' }),
    el('td', { class: 'pool-live', text: String(p.live_workers) }),
    workers,
    el('td', {}, btn));
}

async function loadPools() {
  try {
    const data = await api('GET', '/v1/admin/pools');
    const pools = (data && data.pools) || [];
    $('pools').querySelector('tbody').replaceChildren(...pools.map(poolRow));
    $('pools-empty').hidden = pools.length > 0;
    showError(null);
  } catch (err) {
    showError(err);
  }
}

async function setPaused(cluster, paused) {
  try {
    await api('POST', '/v1/admin/pools/' + encodeURIComponent(cluster) + (paused ? '/pause' : '/resume'));
    await loadPools();
  } catch (err) {
    showError(err);
  }
}

// ---- wiring -------------------------------------------------------------

function stopStreams() {
  for (const ctl of streams.values()) ctl.abort();
  streams.clear();
}

function route() {
  const m = location.hash.match(/^#\/job\/(.+)$/);
  clearInterval(pollTimer);
  $('ops-page').hidden = true;
  if (m) {
    showJob(decodeURIComponent(m[1]));
    return;
  }
  pageJob = null;
  stopStreams();
  $('job-page').hidden = true;
  if (location.hash === '#/ops') {
    $('list-page').hidden = true;
    $('ops-page').hidden = false;
    loadPools();
    pollTimer = setInterval(loadPools, POLL_MS);
    return;
  }
  $('list-page').hidden = false;
  filtersFromHash();
  lastListHash = listHash();
  loadJobs();
  loadViews();
  viewsPolls = 0;
  pollTimer = setInterval(() => {
    loadJobs();
    if (++viewsPolls % VIEWS_EVERY === 0) loadViews();
  }, POLL_MS);
}

function showAuth() {
  $('auth-status').textContent = token() ? 'token set for this tab' : 'no token';
}

document.addEventListener('DOMContentLoaded', async () => {
  try { config = await (await fetch('config.json')).json(); } catch (e) { /* defaults */ }
  $('token').value = token();
  showAuth();
  $('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    sessionStorage.setItem('mvq.token', $('token').value.trim());
    showAuth();
    route();
  });
  $('forget-token').addEventListener('click', () => {
    sessionStorage.removeItem('mvq.token');
    $('token').value = '';
    showAuth();
    route();
  });
  $('refresh-form').addEventListener('submit', (e) => {
    e.preventDefault();
    startRefresh($('refresh-view').value.trim());
  });
  $('filters').addEventListener('submit', (e) => { e.preventDefault(); filtersChanged(); });
  $('filter-view').addEventListener('change', filtersChanged);
  $('filter-state').addEventListener('change', filtersChanged);
  $('job-items').addEventListener('toggle', () => {
    if (!$('job-items').open) { $('job-events').replaceChildren(); return; }
    $('job-events').replaceChildren(...allEvents.filter((e) => e.type === 'progress').map((e) =>
      el('li', { text: fmtTime(e.time) + '  ' + e.state + (e.phase ? ' / ' + e.phase : '') + (e.message ? '  ' + e.message : '') })));
  });
  $('cancel-btn').addEventListener('click', cancelJob);
  $('retry-btn').addEventListener('click', retryJob);
  window.addEventListener('hashchange', route);
  route();
});
