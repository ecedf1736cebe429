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

// ---- list page --------------------------------------------------------

const jobsById = new Map();

function jobRow(job) {
  const pr = progressOf(job);
  const bar = el('progress', { max: '1', value: String(pr.frac) });
  const tr = el('tr', { class: 'job-row', 'data-job-id': job.job_id, 'data-state': job.state },
    el('td', {}, el('code', { text: job.job_id.slice(0, 12) })),
    el('td', { text: job.view }),
    el('td', { class: 'job-state' }, stateBadge(job.state)),
    el('td', { text: job.phase || '' }),
    el('td', {}, bar, ' ' + pr.done + '/' + pr.total),
    el('td', { text: fmtTime(job.created_at) }));
  tr.addEventListener('click', () => { location.hash = '#/job/' + encodeURIComponent(job.job_id); });
  return tr;
}

function renderJobs() {
  const list = [...jobsById.values()].sort((a, b) => (b.created_at || '').localeCompare(a.created_at || ''));
  const tbody = $('jobs').querySelector('tbody');
  tbody.replaceChildren(...list.map(jobRow));
  $('jobs-empty').hidden = list.length > 0;
  renderViews(list);
}

function renderViews(list) {
  const views = new Map();
  for (const j of list) {
    const v = views.get(j.view) || { latest: null, done: null };
    if (!v.latest) v.latest = j;
    if (!v.done && j.state === 'DONE') v.done = j;
    views.set(j.view, v);
  }
  const rows = [...views.entries()].sort((a, b) => a[0].localeCompare(b[0])).map(([name, v]) => {
    const btn = el('button', { type: 'button', class: 'refresh-view', 'data-view': name, text: 'Refresh' });
    btn.addEventListener('click', () => startRefresh(name));
    const res = v.done && v.done.result;
    return el('tr', { 'data-view': name },
      el('td', { text: name }),
      el('td', { text: v.done ? fmtTime(v.done.finished_at) : 'never' }),
      el('td', { text: res ? String(res.source_version) : '—' }),
      el('td', { text: res ? String(res.view_version) : '—' }),
      el('td', {}, stateBadge(v.latest.state)),
      el('td', {}, btn));
  });
  $('views').querySelector('tbody').replaceChildren(...rows);
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
    location.hash = '#/job/' + encodeURIComponent(data.job_id);
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

async function showJob(id) {
  $('list-page').hidden = true;
  $('job-page').hidden = false;
  $('job-events').replaceChildren();
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
    $('job-events').append(el('li', { text: fmtTime(e.time) + '  ' + e.type + '  ' + e.state + (e.phase ? ' / ' + e.phase : '') + (e.message ? '  ' + e.message : '') }));
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

// ---- wiring -------------------------------------------------------------

function stopStreams() {
  for (const ctl of streams.values()) ctl.abort();
  streams.clear();
}

function route() {
  const m = location.hash.match(/^#\/job\/(.+)$/);
  clearInterval(pollTimer);
  if (m) {
    showJob(decodeURIComponent(m[1]));
    return;
  }
  pageJob = null;
  stopStreams();
  $('job-page').hidden = true;
  $('list-page').hidden = false;
  loadJobs();
  pollTimer = setInterval(loadJobs, POLL_MS);
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
  $('filters').addEventListener('submit', (e) => { e.preventDefault(); loadJobs(); });
  $('filter-view').addEventListener('change', loadJobs);
  $('filter-state').addEventListener('change', loadJobs);
  $('cancel-btn').addEventListener('click', cancelJob);
  $('retry-btn').addEventListener('click', retryJob);
  window.addEventListener('hashchange', route);
  route();
});
