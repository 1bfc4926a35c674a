// The statehost console: reads the admin API of the instance that serves it (README, "Watching
// and asking a running application") and changes nothing. Everything it shows is written as
// text (textContent), never as HTML.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const REFRESH_MS = 2000;
  const CHART_POINTS = 90;

  // The admin token, when the instance has one: in this variable only.
  let token = '';

  // ---- API calls ----

  class AuthError extends Error {}

  // api fetches path with the token; a 401 opens the token prompt and throws AuthError.
  async function api(path, opts = {}) {
    const headers = {};
    if (token) headers.Authorization = 'Bearer ' + token;
    const resp = await fetch(path, { headers, cache: 'no-store', redirect: opts.redirect || 'follow' });
    if (resp.status === 401) {
      const body = await resp.json().catch(() => ({}));
      askToken(token ? 'Wrong token: ' + (body.error || '') : (body.error || 'This admin API needs a token.'));
      throw new AuthError('token needed');
    }
    return resp;
  }

  async function apiJSON(path) {
    const resp = await api(path);
    if (!resp.ok) throw new Error(path + ': ' + (await errorText(resp)));
    return resp.json();
  }

  async function errorText(resp) {
    const text = await resp.text();
    try { return JSON.parse(text).error || text; } catch { return text || resp.statusText; }
  }

  function askToken(msg) {
    $('token-msg').textContent = msg;
    $('conn').textContent = 'token needed';
    const d = $('token-dialog');
    if (!d.open) d.showModal();
    $('token-input').focus();
  }

  $('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    token = $('token-input').value.trim();
    $('token-input').value = '';
    $('token-dialog').close();
    refreshNow();
    if (location.hash.startsWith('#stores')) loadStores();
  });

  function banner(msg) {
    const b = $('banner');
    b.textContent = msg || '';
    b.hidden = !msg;
  }

  // ---- formatting ----

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function row(cells) {
    const tr = document.createElement('tr');
    for (const c of cells) {
      const td = document.createElement('td');
      if (c instanceof Node) td.appendChild(c); else td.textContent = c === undefined || c === null ? '' : String(c);
      tr.appendChild(td);
    }
    return tr;
  }

  function fill(tbody, rows) {
    tbody.replaceChildren(...rows);
  }

  const short = (h) => (h || '').slice(0, 12);
  const num = (n) => Number(n).toLocaleString('en-US');

  function duration(s) {
    if (s < 0) return '?';
    if (s < 1) return (s * 1000).toFixed(0) + ' ms';
    if (s < 120) return s.toFixed(s < 10 ? 1 : 0) + ' s';
    if (s < 7200) return (s / 60).toFixed(0) + ' min';
    return (s / 3600).toFixed(1) + ' h';
  }

  function when(iso) {
    if (!iso) return '';
    const d = new Date(iso);
    return isNaN(d) ? iso : d.toLocaleString();
  }

  // ---- overview: figures ----

  // Samples of the counters of /metrics, for the charts: {t, records, commitSum, commitCount}.
  const samples = [];

  // metricSum sums the samples of the metric name (every label set) in Prometheus text.
  function metricSum(text, name) {
    let sum = 0, found = false;
    for (const line of text.split('\n')) {
      if (!line.startsWith(name)) continue;
      const next = line.charAt(name.length);
      if (next !== ' ' && next !== '{') continue;
      const v = parseFloat(line.slice(line.lastIndexOf(' ') + 1));
      if (!isNaN(v)) { sum += v; found = true; }
    }
    return found ? sum : null;
  }

  async function sampleMetrics() {
    const resp = await api('/metrics');
    if (!resp.ok) throw new Error('/metrics: ' + resp.status);
    const text = await resp.text();
    samples.push({
      t: performance.now() / 1000,
      records: metricSum(text, 'statehost_records_processed_total') || 0,
      commitSum: metricSum(text, 'statehost_commit_seconds_sum') || 0,
      commitCount: metricSum(text, 'statehost_commit_seconds_count') || 0,
    });
    while (samples.length > CHART_POINTS + 1) samples.shift();
    const rates = [], latencies = [];
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1], b = samples[i], dt = b.t - a.t;
      rates.push(dt > 0 ? Math.max(b.records - a.records, 0) / dt : 0);
      const n = b.commitCount - a.commitCount;
      latencies.push(n > 0 ? (b.commitSum - a.commitSum) / n : null);
    }
    if (rates.length) $('fig-rate').textContent = num(Math.round(rates[rates.length - 1]));
    const lastLatency = latencies.filter((x) => x !== null).pop();
    $('fig-commit').textContent = lastLatency === undefined ? '–' : duration(lastLatency);
    chart($('chart-rate'), rates);
    chart($('chart-commit'), latencies);
  }

  function chart(svg, values) {
    const [w, h] = [240, 48];
    const max = Math.max(...values.filter((v) => v !== null), 0);
    const step = w / (CHART_POINTS - 1);
    const off = CHART_POINTS - values.length;
    const pts = [];
    values.forEach((v, i) => {
      if (v === null) return;
      const y = max > 0 ? h - 2 - (v / max) * (h - 4) : h - 2;
      pts.push(((off + i) * step).toFixed(1) + ',' + y.toFixed(1));
    });
    svg.querySelector('polyline').setAttribute('points', pts.join(' '));
    svg.setAttribute('data-points', String(pts.length));
  }

  async function loadSummary() {
    const st = await apiJSON('/v1/status?summary=true');
    $('app-id').textContent = st.application_id;
    $('instance').textContent = st.admin ? 'instance ' + st.admin : '';
    const s = st.summary;
    $('fig-tasks').textContent = num(s.tasks);
    $('fig-states').textContent = Object.entries(s.states).map(([k, v]) => v + ' ' + k).join(' · ');
    $('fig-restores').textContent = num(s.restores);
    $('fig-restore-lag').textContent = s.restores ? 'lag ' + num(s.restore_lag) + ' · ETA ' + duration(s.eta_seconds) : '';
  }

  // ---- overview: tasks, a page at a time ----

  const taskPages = ['']; // the after of each page seen, the current one last
  let taskNext = '';

  async function loadTasks() {
    const q = new URLSearchParams({ limit: $('task-limit').value || '100' });
    if ($('task-state').value) q.set('state', $('task-state').value);
    if ($('task-processor').value) q.set('processor', $('task-processor').value);
    const after = taskPages[taskPages.length - 1];
    if (after) q.set('after', after);
    const st = await apiJSON('/v1/status?' + q);
    taskNext = (st.page && st.page.next) || '';
    const total = st.page ? st.page.total : st.tasks.length;
    $('tasks-page').textContent = total ? 'page ' + taskPages.length + ' · ' + num(total) + ' tasks' : 'no tasks';
    $('tasks-prev').disabled = taskPages.length < 2;
    $('tasks-next').disabled = !taskNext;
    fill($('tasks').tBodies[0], st.tasks.map(taskRow));
  }

  function taskRow(t) {
    const tr = row([t.processor, t.partition, el('span', t.state, 'state ' + t.state), t.lag < 0 ? '?' : num(t.lag), restoresCell(t)]);
    tr.dataset.task = t.processor + '/' + t.partition;
    return tr;
  }

  function restoresCell(t) {
    const div = document.createElement('div');
    for (const r of t.restores || []) {
      const line = el('div', null, 'restore');
      line.appendChild(el('span', r.store + ' ', 'store'));
      if (t.state === 'standby') {
        line.appendChild(el('span', 'following · lag ' + num(r.lag)));
      } else if (r.done) {
        line.appendChild(el('span', 'restored ' + num(r.restored) + ' records', 'muted'));
      } else {
        const p = document.createElement('progress');
        p.max = Math.max(r.total, 1);
        p.value = Math.min(r.restored, p.max);
        line.appendChild(p);
        const pct = r.total > 0 ? Math.floor((100 * r.restored) / r.total) : 0;
        line.appendChild(el('span', ' ' + num(r.restored) + ' / ' + num(r.total) + ' (' + pct + '%) · ' +
          num(Math.round(r.rate)) + '/s · ' + duration(r.eta_seconds) + ' left'));
      }
      div.appendChild(line);
    }
    return div;
  }

  $('tasks-next').addEventListener('click', () => { if (taskNext) { taskPages.push(taskNext); refreshNow(); } });
  $('tasks-prev').addEventListener('click', () => { if (taskPages.length > 1) { taskPages.pop(); refreshNow(); } });
  $('task-filter').addEventListener('change', () => { taskPages.length = 1; refreshNow(); });
  $('task-filter').addEventListener('submit', (e) => e.preventDefault());

  // ---- overview: processors and deploys ----

  async function loadProcessors() {
    const procs = await apiJSON('/v1/processors');
    const sel = $('task-processor');
    const names = procs.map((p) => p.name);
    if (sel.options.length - 1 !== names.length) {
      const cur = sel.value;
      sel.replaceChildren(el('option', 'all'), ...names.map((n) => el('option', n)));
      sel.options[0].value = '';
      sel.value = cur;
    }
    fill($('processors').tBodies[0], procs.map((p) => {
      const hash = el('code', short(p.current.hash));
      hash.title = p.current.hash;
      const prev = el('code', p.previous ? short(p.previous.hash) : '');
      if (p.previous) prev.title = p.previous.hash + ', loaded ' + when(p.previous.loaded_at);
      return row([p.name, hash, p.current.source, when(p.current.loaded_at), prev, p.switched + ' / ' + p.tasks]);
    }));
  }

  async function loadDeploys() {
    const deploys = await apiJSON('/v1/deploys');
    $('deploys-empty').hidden = deploys.length > 0;
    fill($('deploys').tBodies[0], deploys.map((d) => row([when(d.time), d.processor, el('span', d.result, 'result ' + d.result),
      el('code', short(d.hash)), el('code', short(d.previous)), d.origin, d.tasks, d.error || ''])));
  }

  // ---- the refresh loop ----

  let timer = null;
  let refreshing = false;

  async function refresh() {
    if ($('token-dialog').open || refreshing) return;
    refreshing = true;
    try {
      const parts = [sampleMetrics(), loadSummary()];
      if (!$('overview').hidden) parts.push(loadTasks(), loadProcessors(), loadDeploys());
      const results = await Promise.allSettled(parts);
      const failed = results.filter((r) => r.status === 'rejected' && !(r.reason instanceof AuthError));
      if (results.some((r) => r.status === 'rejected' && r.reason instanceof AuthError)) return;
      $('conn').textContent = failed.length ? '' : 'updated ' + new Date().toLocaleTimeString();
      banner(failed.length ? String(failed[0].reason.message || failed[0].reason) : '');
    } finally {
      refreshing = false;
    }
  }

  function refreshNow() {
    clearTimeout(timer);
    refresh().finally(() => { timer = setTimeout(refreshNow, REFRESH_MS); });
  }

  // ---- stores ----

  let stores = [];
  const entryPages = ['']; // the after of each page of the current query, the current one last
  let entryNext = '';
  let lastEntries = []; // the current page, to redraw in another encoding
  let lastQuery = null;

  async function loadStores() {
    try {
      stores = await apiJSON('/v1/stores');
    } catch (e) {
      if (!(e instanceof AuthError)) $('store-msg').textContent = e.message;
      return;
    }
    const sel = $('store-select');
    const cur = sel.value;
    sel.replaceChildren(...stores.map((s) => el('option', s.name)));
    if (stores.some((s) => s.name === cur)) sel.value = cur;
    showStoreFields();
  }

  const currentStore = () => stores.find((s) => s.name === $('store-select').value);

  function showStoreFields() {
    const s = currentStore();
    if (!s) return;
    const windowed = s.type !== 'keyvalue';
    let info = s.type + ' store of ' + s.processor + ', ' + s.partitions + (s.partitions === 1 ? ' partition, ' : ' partitions, ') + s.backend;
    if (s.window) {
      info += s.type === 'window' ? ', windows of ' + duration(s.window.size_ms / 1000) : ', gap ' + duration(s.window.inactivity_gap_ms / 1000);
      info += ', retention ' + duration(s.window.retention_ms / 1000);
    }
    $('store-info').textContent = info;
    document.body.classList.toggle('is-windowed', windowed);
    const mode = $('q-mode').value;
    document.body.classList.toggle('mode-range', !windowed && mode === 'range');
    document.body.classList.toggle('mode-key', windowed || mode === 'key');
    $('q-key').placeholder = windowed ? 'key (empty: every key)' : 'key';
  }

  $('store-select').addEventListener('change', showStoreFields);
  $('q-mode').addEventListener('change', showStoreFields);

  // storeQuery builds the path of the query the form asks for; after is the page's cursor.
  function storeQuery(after) {
    const s = currentStore();
    const windowed = s.type !== 'keyvalue';
    const key = $('q-key').value;
    const q = new URLSearchParams();
    const set = (name, id) => { const v = $(id).value; if (v !== '') q.set(name, v); };
    set('partition', 'q-partition');
    if ($('q-stale').checked) q.set('stale', 'true');
    const base = '/v1/stores/' + encodeURIComponent(s.name);
    if (!windowed && $('q-mode').value === 'key') {
      return { path: base + '/keys/' + encodeURIComponent(key) + '?' + q, single: true, key };
    }
    set('limit', 'q-limit');
    if (after) q.set('after', after);
    if (windowed) {
      set('from_time', 'q-from-time');
      set('to_time', 'q-to-time');
      return { path: (key !== '' ? base + '/keys/' + encodeURIComponent(key) : base + '/range') + '?' + q, windowed };
    }
    set('prefix', 'q-prefix');
    set('from', 'q-from');
    set('to', 'q-to');
    return { path: base + '/range?' + q };
  }

  async function runQuery() {
    const s = currentStore();
    if (!s) return;
    const query = storeQuery(entryPages[entryPages.length - 1]);
    lastQuery = query;
    $('store-msg').textContent = 'reading…';
    let resp;
    try {
      resp = await api(query.path, { redirect: 'manual' });
    } catch (e) {
      $('store-msg').textContent = e instanceof AuthError ? 'token needed' : e.message;
      return;
    }
    entryNext = '';
    let entries = [], msg = '';
    if (resp.type === 'opaqueredirect') {
      msg = 'Another instance runs this task: open the console of that instance (its admin address) to read it.';
    } else if (query.single && resp.status === 404) {
      msg = await errorText(resp);
    } else if (!resp.ok) {
      msg = resp.status + ': ' + (await errorText(resp));
    } else if (query.single) {
      const value = new Uint8Array(await resp.arrayBuffer());
      entries = [{ partition: resp.headers.get('X-Statehost-Partition'), key: utf8(query.key), value }];
      msg = '1 key';
    } else {
      entryNext = resp.headers.get('X-Statehost-Next') || '';
      for (const line of (await resp.text()).split('\n')) {
        if (!line) continue;
        const e = JSON.parse(line);
        if (e.error) { msg = 'cut short: ' + e.error; continue; }
        entries.push({
          partition: e.partition,
          key: e.key_base64 !== undefined ? b64(e.key_base64) : utf8(e.key),
          value: e.value_base64 !== undefined ? b64(e.value_base64) : utf8(e.value),
          start: e.start, end: e.end,
        });
      }
      const parts = resp.headers.get('X-Statehost-Partitions');
      msg = msg || (entries.length + (entries.length === 1 ? ' entry' : ' entries') + (parts !== null ? ' · partitions read: ' + (parts || 'none here') : ''));
    }
    $('store-msg').textContent = msg;
    lastEntries = entries;
    drawEntries();
    $('entries-prev').disabled = entryPages.length < 2;
    $('entries-next').disabled = !entryNext;
    $('entries-page').textContent = query.single ? '' : 'page ' + entryPages.length;
  }

  function drawEntries() {
    const windowed = lastQuery && lastQuery.windowed;
    fill($('entries').tBodies[0], lastEntries.map((e) => {
      const tr = row([e.partition, bytesCell(e.key), windowed ? timeCell(e.start) : '', windowed ? timeCell(e.end) : '', bytesCell(e.value)]);
      tr.cells[2].className = tr.cells[3].className = 'windowed';
      return tr;
    }));
  }

  function timeCell(ms) {
    const span = el('span', new Date(ms).toISOString());
    span.title = ms + ' ms';
    return span;
  }

  const hexMode = () => $('enc-hex').checked;

  // bytesCell shows b as text (UTF-8, control characters escaped) or as hex; bytes that are
  // not UTF-8 are shown as hex either way, marked.
  function bytesCell(b) {
    let text = null;
    if (!hexMode()) {
      try { text = new TextDecoder('utf-8', { fatal: true }).decode(b); } catch { text = null; }
    }
    if (text !== null) {
      return el('span', text.replace(/[\u0000-\u001f\u007f]/g, (c) => '\\x' + c.charCodeAt(0).toString(16).padStart(2, '0')), 'bytes');
    }
    const hex = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join(' ');
    return el('code', hex, hexMode() ? 'bytes hex' : 'bytes hex binary');
  }

  const utf8 = (s) => new TextEncoder().encode(s || '');
  const b64 = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));

  $('store-form').addEventListener('submit', (e) => { e.preventDefault(); entryPages.length = 1; runQuery(); });
  $('entries-next').addEventListener('click', () => { if (entryNext) { entryPages.push(entryNext); runQuery(); } });
  $('entries-prev').addEventListener('click', () => { if (entryPages.length > 1) { entryPages.pop(); runQuery(); } });
  for (const r of document.querySelectorAll('input[name=encoding]')) r.addEventListener('change', drawEntries);

  // ---- navigation ----

  function route() {
    const stores = location.hash.startsWith('#stores');
    $('overview').hidden = stores;
    $('stores').hidden = !stores;
    $('nav-overview').classList.toggle('active', !stores);
    $('nav-stores').classList.toggle('active', stores);
    if (stores) loadStores();
  }

  window.addEventListener('hashchange', () => { route(); refreshNow(); });
  route();
  refreshNow();
})();
