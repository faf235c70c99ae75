// Tollgate live dashboard: polls the JSON API every second and draws the
// quota buckets, throttled entities, the clients' own view of themselves
// (KIP-714), connections, audit events and, in a Tollgate cluster, its
// instances. Plain
// JavaScript and SVG; no dependencies. Every value from the API is put in
// the page as text (never as HTML): entity names are arbitrary strings.
'use strict';

(function () {
  const POLL_MS = 1000;
  const TIMEOUT_MS = 5000;
  const HISTORY_MS = 120000; // chart span: the last 2 minutes
  const MIN_SPAN_MS = 15000; // shortest chart span right after the page opens
  const RECENT_MS = 60000; // "throttled recently"
  const TOP_N = 6;
  const MAX_TRACKED = 500; // buckets whose history the page keeps
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const CHART_W = 600;
  const CHART_H = 92;

  const pageStart = Date.now();
  // Per bucket (quota|user|client_id): samples {t, rate, limit, th}, when it
  // was last seen, and when its throttle counter last grew.
  const tracks = new Map();
  let lastOK = 0;
  let resolveQuery = null;
  // This instance is one of a Tollgate cluster (/api/v1/cluster answered
  // 200): bucket rates are then the whole cluster's, as this instance knows
  // them, and instance_rate is this instance's own part.
  let inCluster = false;
  // The quota advisor's proposals (GET /api/v1/quotas/suggest, from this
  // instance's usage ledger over 7 days, p99 + 20 %), by bucket key, asked
  // for once a minute; none in a Tollgate cluster, where one instance's
  // ledger holds its own part of the traffic only.
  let suggestions = new Map();
  let suggestedAt = 0;
  const SUGGEST_MS = 60000;

  // ---------- DOM helpers ----------

  const $ = (id) => document.getElementById(id);

  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k === 'dataset') Object.assign(e.dataset, v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of kids.flat()) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  function s(tag, attrs) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }

  // ---------- formatting ----------

  const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

  function sig(v) {
    const a = Math.abs(v);
    if (a === 0) return '0';
    if (a >= 100) return v.toFixed(0);
    if (a >= 10) return v.toFixed(1).replace(/\.0$/, '');
    return v.toFixed(2).replace(/\.?0+$/, '');
  }

  function bytes(v) {
    if (!isNum(v)) return '–';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    let x = v;
    while (Math.abs(x) >= 1024 && i < units.length - 1) { x /= 1024; i++; }
    return sig(x) + ' ' + units[i];
  }

  // unit formats a value of quota key k (a rate, or a quota's value).
  function unit(k, v) {
    if (!isNum(v)) return '–';
    switch (k) {
      case 'producer_byte_rate':
      case 'consumer_byte_rate':
        return bytes(v) + '/s';
      case 'controller_mutation_rate':
        return sig(v) + ' partitions/s';
      case 'request_percentage':
        return sig(v) + ' %';
      case 'connection_creation_rate':
        return sig(v) + ' conn/s';
      default:
        return sig(v);
    }
  }

  function limitText(k, v) {
    return v === null || v === undefined ? 'unlimited' : unit(k, v);
  }

  // part is a bucket's "this instance: 12 KiB/s (25% of it)" line in a
  // Tollgate cluster; null outside one. The part is averaged over the last
  // exchange intervals and the rate over the quota window, so right after
  // traffic starts the part can exceed the whole: no share is shown then.
  function part(x) {
    if (!inCluster || !x || !isNum(x.instance_rate)) return null;
    const share = isNum(x.rate) && x.rate > 0 && x.instance_rate <= x.rate ? ` (${pct(x.instance_rate / x.rate)} of it)` : '';
    return h('span', { class: 'part', title: 'this instance\'s own connections; the rate above is the whole Tollgate cluster\'s' },
      'this instance: ' + unit(x.quota, x.instance_rate) + share);
  }

  function pct(f) {
    if (!isNum(f)) return '–';
    const p = f * 100;
    if (p !== 0 && Math.abs(p) < 10) return p.toFixed(1) + '%';
    return p.toFixed(0) + '%';
  }

  function utilClass(u) {
    if (!isNum(u)) return 'ok';
    if (u >= 1) return 'bad';
    if (u >= 0.8) return 'warn';
    return 'ok';
  }

  function duration(ms) {
    if (!isNum(ms)) return '–';
    if (ms < 1000) return Math.round(ms) + ' ms';
    if (ms < 60000) return sig(ms / 1000) + ' s';
    if (ms < 3600000) return sig(ms / 60000) + ' min';
    return sig(ms / 3600000) + ' h';
  }

  function count(n) {
    return isNum(n) ? n.toLocaleString('en-US') : '–';
  }

  function clock(d) {
    return d.toLocaleTimeString('en-GB', { hour12: false });
  }

  // stamp is clock(d), with the date when d is not today.
  function stamp(d) {
    const today = new Date();
    if (d.toDateString() === today.toDateString()) return clock(d);
    return d.toLocaleDateString('en-CA') + ' ' + clock(d);
  }

  function ago(ms) {
    if (ms < 5000) return 'just now';
    if (ms < 60000) return Math.round(ms / 1000) + ' s ago';
    if (ms < 3600000) return Math.round(ms / 60000) + ' min ago';
    if (ms < 86400000) return Math.round(ms / 3600000) + ' h ago';
    return Math.round(ms / 86400000) + ' d ago';
  }

  // A bucket tag: "" means the dimension is not part of the bucket.
  function tag(v, what) {
    if (v === undefined || v === null || v === '') {
      return h('span', { class: 'none', title: 'not part of this bucket: shared by every ' + what }, 'all');
    }
    return h('span', { class: 'mono' }, v);
  }

  // A bucket's client-id tag, or its client-id prefix group ("bar-*": every
  // client-id starting with bar- shares the bucket).
  function clientTag(b) {
    if (b && typeof b.client_id_prefix === 'string' && b.client_id_prefix !== '') {
      return h('span', { class: 'mono', title: 'a client-id prefix group: shared by every client-id starting with ' + b.client_id_prefix },
        b.client_id_prefix + '*');
    }
    return tag(b && b.client_id, 'client-id');
  }

  // A per-topic quota's bucket's topic ("logs-*": every topic starting
  // with logs- shares it), as a row of the card; none for a client quota.
  function topicRow(b) {
    if (b.topic_prefix) {
      return [h('dt', {}, 'topic'), h('dd', {}, h('span', { class: 'mono', title: 'a topic prefix: shared by every topic starting with ' + b.topic_prefix }, b.topic_prefix + '*'))];
    }
    if (b.topic) {
      return [h('dt', {}, 'topic'), h('dd', {}, h('span', { class: 'mono' }, b.topic))];
    }
    return [];
  }

  // An entity ([{type, name, default}]) as "user=alice, client-id=default".
  function entityNode(parts) {
    if (!Array.isArray(parts) || parts.length === 0) return h('span', { class: 'none' }, '—');
    const out = h('span', {});
    parts.forEach((p, i) => {
      if (i > 0) out.append(', ');
      if (!p || typeof p !== 'object') { out.append(String(p)); return; }
      out.append(String(p.type ?? '?') + '=');
      if (p.default || p.name === null || p.name === undefined) {
        out.append(h('span', { class: 'dflt', title: 'the default entity' }, 'default'));
      } else {
        out.append(h('span', { class: 'mono' }, String(p.name)));
      }
    });
    return out;
  }

  // Kafka's eight levels and Tollgate's client-id prefix (7p, between 7 and
  // 8), in precedence order, with their numbers in docs/quotas.md.
  const LEVELS = ['user+client-id', 'user+default-client-id', 'user', 'default-user+client-id',
    'default-user+default-client-id', 'default-user', 'client-id', 'client-id-prefix', 'default-client-id'];
  const LEVEL_NUMBERS = ['1', '2', '3', '4', '5', '6', '7', '7p', '8'];

  function levelText(l) {
    const i = LEVELS.indexOf(l);
    return i < 0 ? String(l ?? '') : 'level ' + LEVEL_NUMBERS[i] + ' · ' + l;
  }

  // ---------- API key ----------

  // The admin port may need an API key (401). The page asks for one and
  // keeps it in sessionStorage: this tab only, gone when it closes; never
  // a cookie, so no other site's request can carry it.
  const KEY_ITEM = 'tollgate.apiKey';
  let waitingForKey = false;
  let memKey = ''; // the key in use (sessionStorage's copy, or the page's own when storage is off)

  function storedKey() {
    try { return sessionStorage.getItem(KEY_ITEM) || ''; } catch (_) { return ''; }
  }

  function setKey(k) {
    try {
      if (k) sessionStorage.setItem(KEY_ITEM, k); else sessionStorage.removeItem(KEY_ITEM);
    } catch (_) { /* storage disabled: the key lives as long as the page */ }
    memKey = k;
    $('forget-key').hidden = !k;
  }

  // askForKey shows the key form (polling pauses until a key is given).
  function askForKey(why) {
    waitingForKey = true;
    const panel = $('key-panel');
    $('key-why').replaceChildren(why);
    panel.hidden = false;
    $('status').className = 'status stale';
    $('status-text').textContent = 'Key required';
    if (document.activeElement !== $('key-input')) $('key-input').focus();
  }

  function setupKey() {
    memKey = storedKey();
    $('forget-key').hidden = !memKey;
    $('key-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const k = $('key-input').value.trim();
      if (!k) return;
      if (!/^[\x21-\x7e]+$/.test(k)) {
        $('key-why').replaceChildren(h('span', { class: 'err' }, 'That is not an API key: one is printable ASCII, like tg_….'));
        return;
      }
      setKey(k);
      $('key-input').value = '';
      // One request tries the key before polling resumes, so a wrong key
      // costs one failed login, not one per endpoint.
      getJSON('api/v1/connections').then(() => true, (e) => e.status !== 401).then((ok) => {
        if (!ok) return; // getJSON asked for another key
        $('key-panel').hidden = true;
        waitingForKey = false;
      });
    });
    $('forget-key').addEventListener('click', () => {
      setKey('');
      askForKey('The key was forgotten. Enter an API key to see this gateway again.');
    });
  }

  // ---------- API ----------

  class HTTPError extends Error {
    constructor(status, msg) { super(msg); this.status = status; }
  }

  async function getJSON(path) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS);
    const headers = { Accept: 'application/json' };
    const sent = memKey;
    if (sent) headers.Authorization = 'Bearer ' + sent;
    let r;
    try {
      r = await fetch(path, { cache: 'no-store', signal: ctl.signal, headers });
    } catch (e) {
      throw new Error(e && e.name === 'AbortError' ? 'timed out' : 'gateway unreachable');
    } finally {
      clearTimeout(timer);
    }
    let body = null;
    try { body = await r.json(); } catch (_) { /* not JSON */ }
    if (!r.ok) {
      const msg = body && typeof body.error === 'string' ? body.error : '';
      if (r.status === 401) {
        // A refused key is forgotten at once: it is not retried every second.
        if (sent && sent === memKey) setKey('');
        askForKey(sent ? 'That key was refused (' + (msg || 'HTTP 401') + '). Enter another API key.'
          : 'This gateway\'s admin port needs an API key to show its state.');
      }
      throw new HTTPError(r.status, 'HTTP ' + r.status + (msg ? ': ' + msg : ''));
    }
    if (body === null || typeof body !== 'object') throw new Error('not a JSON object');
    return body;
  }

  // ---------- bucket history ----------

  // A per-topic quota's bucket is its own bucket, apart from the client
  // quota's bucket of the same user and client-id.
  const keyOf = (b) => [b.quota, b.user, b.client_id, b.client_id_prefix || '', b.topic || '', b.topic_prefix || ''].join('\u0000');

  function record(buckets, now) {
    for (const b of buckets) {
      const k = keyOf(b);
      let tr = tracks.get(k);
      if (!tr) {
        if (tracks.size >= MAX_TRACKED) continue;
        // Throttles seen at first sight count as recent only if the bucket
        // was active in the last minute: the page cannot know more.
        const active = Date.parse(b.last_active);
        const recent = b.throttled > 0 && isNum(active) && now - active < RECENT_MS;
        tr = { points: [], throttledAt: recent ? now : 0, lastTh: b.throttled };
        tracks.set(k, tr);
      }
      if (isNum(b.throttled) && b.throttled > tr.lastTh) tr.throttledAt = now;
      tr.lastTh = b.throttled;
      tr.seen = now;
      tr.points.push({ t: now, rate: isNum(b.rate) ? b.rate : 0, limit: isNum(b.limit) ? b.limit : null, th: b.throttled });
      while (tr.points.length && tr.points[0].t < now - HISTORY_MS - 2000) tr.points.shift();
    }
    for (const [k, tr] of tracks) {
      if (now - tr.seen > HISTORY_MS) tracks.delete(k);
    }
  }

  // throttlesSince is how much the bucket's throttle counter grew in the
  // last ms milliseconds (as far as the page has seen).
  function throttlesSince(tr, now, ms) {
    if (!tr || tr.points.length === 0) return 0;
    let base = tr.points[0];
    for (const p of tr.points) {
      if (p.t >= now - ms) break;
      base = p;
    }
    return Math.max(0, tr.lastTh - base.th);
  }

  // ---------- chart ----------

  function niceCeil(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) {
      if (m * p >= v) return m * p;
    }
    return 10 * p;
  }

  function chart(b, tr, now) {
    const pts = tr ? tr.points : [];
    const span = Math.min(HISTORY_MS, Math.max(MIN_SPAN_MS, now - pageStart));
    let top = 0;
    for (const p of pts) {
      top = Math.max(top, p.rate);
      if (p.limit !== null) top = Math.max(top, p.limit * 1.2);
    }
    if (isNum(b.limit)) top = Math.max(top, b.limit * 1.2);
    if (b.quota === 'producer_byte_rate' || b.quota === 'consumer_byte_rate') {
      top = Math.max(top, 1024);
    }
    top = niceCeil(top * 1.05);
    const x = (t) => (CHART_W - ((now - t) / span) * CHART_W).toFixed(1);
    const y = (v) => (CHART_H - (Math.min(v, top) / top) * (CHART_H - 4)).toFixed(1);

    const svg = s('svg', { viewBox: `0 0 ${CHART_W} ${CHART_H}`, preserveAspectRatio: 'none', role: 'img' });
    const label = `${b.quota}: ${unit(b.quota, b.rate)} now` +
      (isNum(b.limit) ? ` against a quota of ${unit(b.quota, b.limit)}` : ', no quota') +
      `, over the last ${Math.round(span / 1000)} seconds`;
    svg.setAttribute('aria-label', label);
    const title = s('title');
    title.textContent = label;
    svg.append(title);
    for (const f of [0.25, 0.5, 0.75]) {
      svg.append(s('line', { class: 'grid', x1: 0, x2: CHART_W, y1: y(top * f), y2: y(top * f) }));
    }
    svg.append(s('line', { class: 'grid', x1: 0, x2: CHART_W, y1: CHART_H, y2: CHART_H }));

    // Rate: a line, broken where polls were missed, and its area.
    const visible = pts.filter((p) => p.t >= now - span - 1500);
    let line = '';
    let area = '';
    let segStart = null;
    let prev = null;
    const closeSeg = () => {
      if (segStart !== null && prev !== null) area += `L${x(prev.t)},${CHART_H}L${x(segStart.t)},${CHART_H}Z`;
    };
    for (const p of visible) {
      if (prev === null || p.t - prev.t > 3 * POLL_MS + 500) {
        closeSeg();
        line += `M${x(p.t)},${y(p.rate)}`;
        area += `M${x(p.t)},${CHART_H}L${x(p.t)},${y(p.rate)}`;
        segStart = p;
      } else {
        line += `L${x(p.t)},${y(p.rate)}`;
        area += `L${x(p.t)},${y(p.rate)}`;
      }
      prev = p;
    }
    closeSeg();
    if (area) svg.append(s('path', { class: 'area', d: area }));

    // Quota: a dashed step line.
    let q = '';
    let qprev = null;
    for (const p of visible) {
      if (p.limit === null) { qprev = null; continue; }
      if (qprev === null) q += `M${x(p.t)},${y(p.limit)}`;
      else if (qprev.limit !== p.limit) q += `L${x(p.t)},${y(qprev.limit)}L${x(p.t)},${y(p.limit)}`;
      else q += `L${x(p.t)},${y(p.limit)}`;
      qprev = p;
    }
    if (q) svg.append(s('path', { class: 'quota', d: q }));

    if (line) {
      svg.append(s('path', { class: 'rate', d: line }));
      // The part above the current quota, in red.
      if (isNum(b.limit)) {
        const id = 'clip' + Math.random().toString(36).slice(2);
        const defs = s('defs');
        const cp = s('clipPath', { id });
        cp.append(s('rect', { x: 0, y: -10, width: CHART_W, height: Number(y(b.limit)) + 10 }));
        defs.append(cp);
        svg.append(defs);
        svg.append(s('path', { class: 'rate over', d: line, 'clip-path': `url(#${id})` }));
      }
    }

    const legend = h('div', { class: 'legend', 'aria-hidden': 'true' },
      h('span', {}, h('i', {}), 'rate'),
      isNum(b.limit) ? h('span', {}, h('i', { class: 'q' }), 'quota ' + unit(b.quota, b.limit)) : null,
      h('span', { class: 'scale' }, 'scale 0 – ' + unit(b.quota, top)));
    const box = h('div', { class: 'chart' }, svg);
    const spanText = span >= HISTORY_MS ? '2 min ago' : Math.round(span / 1000) + ' s ago';
    return [legend, box, h('div', { class: 'axis', 'aria-hidden': 'true' }, h('span', {}, spanText), h('span', {}, 'now'))];
  }

  // ---------- sections ----------

  // A shadow bucket throttles nobody: it is shown with what it would have
  // done, never among the throttled.
  function isThrottled(b, tr, now) {
    if (b.shadow) return false;
    return (isNum(b.utilization) && b.utilization > 1) || (tr && tr.throttledAt > 0 && now - tr.throttledAt < RECENT_MS);
  }

  // What a shadow quota would have done: "would have throttled 12 % of
  // 340 requests, by up to 2.5 s".
  function shadowText(s) {
    if (!s || typeof s !== 'object' || !isNum(s.records)) return 'shadow: measured, not enforced';
    if (!s.throttled) return `shadow: would have throttled none of ${count(s.records)} requests`;
    const p = isNum(s.throttled_percent) ? s.throttled_percent : 0;
    return `shadow: would have throttled ${p < 10 ? p.toFixed(1) : p.toFixed(0)} % of ${count(s.records)} requests, by up to ${duration(s.throttle_ms_max)}`;
  }

  // refreshSuggestions asks the advisor for the proposals of every
  // grouping a client bucket has: (user, client-id), user, client-id.
  async function refreshSuggestions(now) {
    if (inCluster || now - suggestedAt < SUGGEST_MS) return;
    const next = new Map();
    for (const by of ['user,client-id', 'user', 'client-id']) {
      let r;
      try {
        r = await getJSON('api/v1/quotas/suggest?by=' + encodeURIComponent(by));
      } catch (e) {
        // The ledger is off (503): asked again in a minute; anything
        // else (no key yet) at the next poll.
        if (e && e.status === 503) suggestedAt = now;
        return;
      }
      suggestedAt = now;
      if (!r || !Array.isArray(r.proposals) || r.instance_only) return;
      for (const p of r.proposals) {
        next.set(`${p.quota}|${p.user || ''}|${p.client_id || ''}`, p);
      }
    }
    suggestions = next;
  }

  // suggestionText is the advisor's proposal for a client bucket: "usage
  // suggests 120 B/s (p99 of 61 minutes; would have throttled 1)".
  function suggestionText(b) {
    if (b.topic || b.topic_prefix || b.client_id_prefix || !(b.quota === 'producer_byte_rate' || b.quota === 'consumer_byte_rate')) return null;
    const p = suggestions.get(`${b.quota}|${b.user || ''}|${b.client_id || ''}`);
    if (!p || !isNum(p.value)) return null;
    return `usage suggests ${unit(b.quota, p.value)} (p99 of ${count(p.minutes)} minutes of 7 days + 20 %; ` +
      `would have throttled ${count(p.throttled_minutes)})`;
  }

  function renderTop(buckets, now) {
    const grid = $('top-grid');
    const top = buckets
      .filter((b) => (isNum(b.rate) && b.rate > 0) || isNum(b.limit))
      .sort((a, b) => (b.utilization - a.utilization) || (b.rate - a.rate))
      .slice(0, TOP_N);
    if (top.length === 0) {
      grid.replaceChildren(h('p', { class: 'empty' }, buckets.length
        ? 'No bucket has traffic right now.'
        : 'No live quota buckets yet: they appear when clients send traffic.'));
      return;
    }
    grid.replaceChildren(...top.map((b) => {
      const tr = tracks.get(keyOf(b));
      const hot = isThrottled(b, tr, now);
      const uc = utilClass(b.utilization);
      const card = h('article', {
        class: 'card' + (hot ? ' hot' : ''),
        dataset: { quota: b.quota, user: b.user, clientId: b.client_id },
        'aria-label': `${b.quota} bucket of user ${b.user || 'all'}, ` +
          (b.client_id_prefix ? `client-ids starting with ${b.client_id_prefix}` : `client-id ${b.client_id || 'all'}`) +
          (b.topic ? `, on topic ${b.topic}` : b.topic_prefix ? `, on topics starting with ${b.topic_prefix}` : ''),
      },
      h('div', { class: 'card-head' },
        h('span', { class: 'key' }, b.quota),
        hot ? h('span', { class: 'badge bad' }, 'throttled')
          : b.shadow ? h('span', { class: 'badge info', title: 'measured, not enforced' }, 'shadow')
            : isNum(b.limit) ? h('span', { class: 'badge muted' }, b.level || 'quota')
              : h('span', { class: 'badge info' }, 'no quota')),
      h('dl', { class: 'who' },
        h('dt', {}, 'user'), h('dd', {}, tag(b.user, 'user')),
        h('dt', {}, 'client-id'), h('dd', {}, clientTag(b)),
        ...topicRow(b)),
      h('div', { class: 'figures' },
        h('div', {},
          h('div', { class: 'rate' }, unit(b.quota, b.rate)),
          h('div', { class: 'of' }, (inCluster ? 'Tollgate cluster, ' : '') +
            (isNum(b.limit) ? 'of ' + unit(b.quota, b.limit) + ' quota' : 'no quota applies')),
          part(b)),
        isNum(b.limit)
          ? h('div', { class: 'utilbox', title: 'utilization: rate ÷ quota' },
            h('div', { class: 'util ' + uc }, pct(b.utilization)), h('div', { class: 'of' }, 'utilization'))
          : null),
      isNum(b.limit)
        ? h('div', { class: 'bar', role: 'presentation' },
          h('span', { class: uc, style: `width:${Math.min(100, b.utilization * 100).toFixed(1)}%` }))
        : h('div', { class: 'bar', role: 'presentation' }),
      b.shadow ? h('p', { class: 'bucket-note' }, shadowText(b.shadowed)) : null,
      suggestionText(b) ? h('p', { class: 'bucket-note suggestion', title: 'tollgate quotas suggest: from the usage ledger' }, suggestionText(b)) : null,
      isNum(b.burst_seconds) ? h('p', { class: 'bucket-note' }, 'start-up burst: ' + (b.burst_seconds === 0 ? 'none' : sig(b.burst_seconds) + ' s of quota')) : null,
      chart(b, tr, now));
      return card;
    }));
  }

  function renderThrottled(buckets, now) {
    const rows = buckets.filter((b) => isThrottled(b, tracks.get(keyOf(b)), now))
      .sort((a, b) => (b.utilization - a.utilization) || (b.throttled - a.throttled));
    const body = $('throttled-body');
    if (rows.length === 0) {
      body.replaceChildren(h('tr', { class: 'empty-row' }, h('td', { colspan: 9 }, 'No entity is over its quota or was throttled in the last minute.')));
    } else {
      body.replaceChildren(...rows.map((b) => {
        const tr = tracks.get(keyOf(b));
        const recent = throttlesSince(tr, now, RECENT_MS);
        return h('tr', { class: 'hot', dataset: { quota: b.quota, user: b.user, clientId: b.client_id } },
          h('td', { class: 'mono' }, b.quota),
          h('td', {}, tag(b.user, 'user')),
          h('td', {}, clientTag(b)),
          h('td', {}, entityNode(b.entity), h('span', { class: 'sub' }, levelText(b.level))),
          h('td', { class: 'num' }, unit(b.quota, b.rate), part(b)),
          h('td', { class: 'num' }, limitText(b.quota, b.limit)),
          h('td', { class: 'num' }, h('span', { class: 'util ' + utilClass(b.utilization) }, pct(b.utilization))),
          h('td', { class: 'num' }, count(b.throttled),
            recent > 0 ? h('span', { class: 'delta', title: 'in the last minute' }, '+' + count(recent)) : null),
          h('td', { class: 'num' }, duration(b.throttle_ms_total)));
      }));
    }
    return rows.length;
  }

  function renderTiles(buckets, throttled, conns) {
    if (buckets) {
      $('tile-buckets').textContent = count(buckets.length);
      const keys = new Set(buckets.map((b) => b.quota));
      $('tile-buckets-note').textContent = buckets.length ? [...keys].join(', ') : 'none active';
      $('tile-throttled').textContent = count(throttled);
      const over = buckets.filter((b) => b.utilization > 1).length;
      $('tile-throttled-note').textContent = throttled ? over + ' over quota now' : 'all within quota';
      $('tile-throttled-box').classList.toggle('alert', throttled > 0);
    }
    if (conns) {
      $('tile-conns').textContent = count(conns.active);
      $('tile-conns-note').textContent = conns.max_connections === null || conns.max_connections === undefined
        ? 'max.connections: unlimited' : 'of max.connections ' + count(conns.max_connections);
      $('tile-accept').textContent = sig(conns.connection_accept_rate || 0) + ' conn/s';
      const ls = Array.isArray(conns.listeners) ? conns.listeners : [];
      const refused = ls.reduce((n, l) => n + (l.throttled || 0) + (l.blocked || 0) + (l.parked || 0) + (l.rejected || 0), 0);
      $('tile-accept-note').textContent = refused ? count(refused) + ' delayed or refused' : 'none delayed or refused';
    }
  }

  function renderConnections(c) {
    const ls = Array.isArray(c.listeners) ? c.listeners : [];
    $('conn-summary').textContent = `Gateway: ${count(c.active)} active` +
      (isNum(c.max_connections) ? ` of ${count(c.max_connections)}` : ' (no max.connections)') +
      ` · accepting ${sig(c.connection_accept_rate || 0)} conn/s`;
    const body = $('listeners-body');
    if (ls.length === 0) {
      body.replaceChildren(h('tr', { class: 'empty-row' }, h('td', { colspan: 9 }, 'No listeners.')));
    } else {
      const nz = (v) => h('td', { class: 'num' }, v > 0 ? h('span', { class: 'nz' }, count(v)) : count(v));
      body.replaceChildren(...ls.map((l) => {
        const lim = l.max_connection_creation_rate;
        const rate = l.connection_accept_rate || 0;
        let rateCell;
        if (isNum(lim) && lim > 0) {
          const f = rate / lim;
          const uc = utilClass(f);
          rateCell = h('div', { class: 'minibar' },
            h('div', { class: 'bar', role: 'presentation' }, h('span', { class: uc, style: `width:${Math.min(100, f * 100).toFixed(1)}%` })),
            h('span', {}, `${sig(rate)} / ${sig(lim)} conn/s`));
        } else {
          rateCell = h('span', {}, `${sig(rate)} conn/s `, h('span', { class: 'none' }, '/ unlimited'));
        }
        const blocked = isNum(l.acceptor_blocked_percent) ? l.acceptor_blocked_percent : 0;
        return h('tr', { dataset: { listener: l.name } },
          h('td', {}, h('span', { class: 'mono' }, l.name), l.exempt ? [' ', h('span', { class: 'badge info', title: 'exempt from the gateway-wide limits' }, 'exempt')] : null),
          h('td', { class: 'num' }, count(l.sessions)),
          h('td', { class: 'num' }, count(l.active), ' / ', isNum(l.max_connections) ? count(l.max_connections) : h('span', { class: 'none' }, '∞')),
          h('td', {}, rateCell),
          h('td', { class: 'num' }, h('span', { class: blocked > 0 ? 'util ' + utilClass(blocked * 1.25) : '' }, pct(blocked))),
          nz(l.throttled), nz(l.blocked), nz(l.parked), nz(l.rejected));
      }));
    }
    const ips = Array.isArray(c.top_ips) ? c.top_ips : [];
    if (ips.length === 0) {
      $('ips').replaceChildren(h('p', { class: 'empty' }, 'No refused connections.'));
    } else {
      $('ips').replaceChildren(h('div', { class: 'table-wrap' }, h('table', {},
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'IP'),
          h('th', { scope: 'col', class: 'num', title: 'Parked by a per-IP connection_creation_rate' }, 'Parked'),
          h('th', { scope: 'col', class: 'num', title: 'Rejected by max.connections.per.ip' }, 'Rejected'))),
        h('tbody', {}, ips.map((ip) => h('tr', {},
          h('td', { class: 'mono' }, ip.ip),
          h('td', { class: 'num' }, count(ip.parked)),
          h('td', { class: 'num' }, count(ip.rejected))))))));
    }
  }

  // ---------- audit ----------

  function auditValue(key, v) {
    if (v === null || v === undefined) return h('span', { class: 'dflt' }, 'unset');
    if (typeof v === 'number') {
      const hu = unit(key, v);
      const raw = String(v);
      return hu === raw || hu === sig(v) ? h('span', {}, raw) : h('span', { title: raw }, hu);
    }
    if (typeof v === 'object') return h('span', {}, JSON.stringify(v));
    return h('span', {}, String(v));
  }

  function outcomeBadge(o) {
    const cls = { applied: 'ok', validated: 'info', rejected: 'bad', denied: 'bad', failed: 'bad' }[o] || 'muted';
    return h('span', { class: 'badge ' + cls }, String(o || 'unknown'));
  }

  function actionText(a) {
    if (typeof a !== 'string' || a === '') return 'Change';
    const t = a.replace(/[_.]+/g, ' ');
    return t.charAt(0).toUpperCase() + t.slice(1);
  }

  function targetNode(e) {
    const t = e.target;
    const ent = (t && Array.isArray(t.entity) && t.entity) || (Array.isArray(e.entity) && e.entity) || (Array.isArray(t) && t);
    if (ent) return entityNode(ent);
    const res = (t && t.resource) || e.resource;
    if (res && typeof res === 'object') return h('span', {}, String(res.type ?? 'resource') + ' ', h('span', { class: 'mono' }, String(res.name ?? '')));
    if (typeof t === 'string') return h('span', { class: 'mono' }, t);
    if (e.entity && typeof e.entity === 'object') return h('span', { class: 'mono' }, JSON.stringify(e.entity));
    return null;
  }

  function renderAudit(a, now) {
    const list = $('audit-list');
    const events = Array.isArray(a.events) ? a.events.slice().reverse() : [];
    if (events.length === 0) {
      list.replaceChildren(h('p', { class: 'empty' }, 'No changes yet.'));
      return;
    }
    list.replaceChildren(h('ol', { class: 'events' }, events.slice(0, 25).map((e) => {
      if (!e || typeof e !== 'object') return h('li', { class: 'event' }, h('span', {}), h('span', { class: 'mono' }, JSON.stringify(e)));
      const t = Date.parse(e.time);
      const when = isNum(t)
        ? h('time', { datetime: e.time, title: new Date(t).toString() }, stamp(new Date(t)), h('span', { class: 'sub' }, ago(now - t)))
        : h('time', {}, '—');
      const ini = e.initiator && typeof e.initiator === 'object' ? e.initiator : {};
      const principal = ini.principal || (typeof e.initiator === 'string' ? e.initiator : '') || e.principal || '';
      const meta = [];
      if (principal) meta.push(h('span', {}, 'by ', h('span', { class: 'mono' }, principal)));
      if (ini.client_id) meta.push(h('span', {}, ' · client ', h('span', { class: 'mono' }, ini.client_id)));
      if (ini.source) meta.push(h('span', {}, ' · from ', h('span', { class: 'mono' }, ini.source)));
      if (ini.listener) meta.push(h('span', {}, ' on ', h('span', { class: 'mono' }, ini.listener)));
      const target = targetNode(e);
      const changes = Array.isArray(e.changes) ? e.changes.filter((c) => c && typeof c === 'object') : [];
      return h('li', { class: 'event' },
        when,
        h('div', {},
          h('div', { class: 'what' },
            h('span', { class: 'action' }, actionText(e.action)),
            outcomeBadge(e.outcome),
            target ? h('span', {}, target) : null),
          meta.length ? h('div', { class: 'meta' }, meta) : null,
          e.error_message ? h('div', { class: 'meta' }, 'error: ' + e.error_message) : null,
          changes.length ? h('ul', { class: 'changes' }, changes.map((c) => h('li', {},
            h('span', {}, String(c.key ?? '?') + ': '),
            h('span', { class: 'old' }, auditValue(c.key, c.old)),
            h('span', { class: 'arrow', 'aria-label': 'changed to' }, '→'),
            h('span', { class: 'new' }, auditValue(c.key, c.new))))) : null));
    })));
  }

  // ---------- Tollgate cluster ----------

  const CLUSTER_HINT = 'Rates are the whole Tollgate cluster\'s, as this instance knows them';
  let lastClusterWarn = null;

  function badge(cls, text, title) {
    return h('span', { class: 'badge ' + cls, title }, text);
  }

  function fact(label, ...value) {
    return h('div', {}, h('dt', {}, label), h('dd', {}, ...value));
  }

  function timeCell(iso, now) {
    const t = Date.parse(iso);
    if (!isNum(t) || t <= 0) return h('span', { class: 'none' }, '—');
    return h('time', { datetime: iso, title: new Date(t).toString() }, stamp(new Date(t)), h('span', { class: 'sub' }, ago(now - t)));
  }

  // ---------- the clients' own view (KIP-714) ----------

  // reportedPair is "produce: avg 120 ms · max 1.5 s" for a pair of
  // reported metrics (ms), or null when the clients pushed neither.
  function reportedPair(rep, label, name, metric) {
    const avg = rep[name + '_avg_ms'];
    const max = rep[name + '_max_ms'];
    if (!isNum(avg) && !isNum(max)) return null;
    return h('div', { class: 'pair', dataset: { metric } },
      h('span', { class: 'sub-label' }, label + ' '),
      'avg ' + duration(avg) + ' · max ' + duration(max));
  }

  const BUCKET_LABELS = { producer_byte_rate: 'produce', consumer_byte_rate: 'fetch', request_percentage: 'requests' };

  function bucketLine(b) {
    return h('div', { class: 'pair', dataset: { quota: String(b.quota ?? '') } },
      h('span', { class: 'sub-label' }, (BUCKET_LABELS[b.quota] || String(b.quota ?? '')) + ' '),
      unit(b.quota, b.rate) + ' of ' + limitText(b.quota, b.limit) + ' ',
      h('span', { class: 'util ' + utilClass(b.utilization) }, pct(b.utilization)),
      b.shadow ? [' ', badge('info', 'shadow', 'measured, not enforced')] : null,
      h('span', { class: 'sub' }, count(b.throttled) + ' throttled · ' + duration(b.throttle_ms_total) + ' in all'));
  }

  function renderTelemetry(t, now) {
    const cs = Array.isArray(t.clients) ? t.clients.filter((c) => c && typeof c === 'object') : [];
    const sub = t.subscription && typeof t.subscription === 'object' ? t.subscription : {};
    $('telemetry-hint').textContent = 'What each client measured of itself over its last push interval (KIP-714; clients are asked to push every ' +
      duration(sub.push_interval_ms) + '), next to what Tollgate\'s quota buckets did to the same user and client-id' +
      (isNum(t.series) && isNum(t.max_series) && t.series >= t.max_series ? ` · at telemetry.max_series (${count(t.max_series)}): the least recently pushed are dropped` : '');
    const body = $('telemetry-body');
    if (cs.length === 0) {
      body.replaceChildren(h('tr', { class: 'empty-row' }, h('td', { colspan: 7 },
        'No client has pushed its metrics yet (librdkafka 2.5+, franz-go, Java clients 3.7+ push them unless told not to).')));
      return;
    }
    body.replaceChildren(...cs.map((c) => {
      const rep = c.reported && typeof c.reported === 'object' ? c.reported : {};
      const buckets = Array.isArray(c.tollgate) ? c.tollgate.filter((b) => b && typeof b === 'object') : [];
      const throttle = [reportedPair(rep, 'produce', 'produce_throttle_time', 'produce_throttle'),
        reportedPair(rep, 'fetch', 'fetch_throttle_time', 'fetch_throttle')].filter(Boolean);
      const latency = [reportedPair(rep, 'produce', 'produce_request_latency', 'produce_latency'),
        reportedPair(rep, 'fetch', 'fetch_request_latency', 'fetch_latency'),
        reportedPair(rep, 'any request', 'node_request_latency', 'node_latency'),
        reportedPair(rep, 'queued', 'record_queue_time', 'queue_time')].filter(Boolean);
      const hot = buckets.some((b) => isNum(b.utilization) && b.utilization >= 1) ||
        (isNum(rep.produce_throttle_time_max_ms) && rep.produce_throttle_time_max_ms > 0) ||
        (isNum(rep.fetch_throttle_time_max_ms) && rep.fetch_throttle_time_max_ms > 0);
      return h('tr', { class: hot ? 'hot' : null, dataset: { user: String(c.user ?? ''), clientId: String(c.client_id ?? '') } },
        h('td', {}, h('span', { class: 'mono' }, String(c.user ?? ''))),
        h('td', {}, h('span', { class: 'mono' }, String(c.client_id ?? ''))),
        h('td', { class: 'reported' }, throttle.length ? throttle : h('span', { class: 'none', title: 'not in the clients\' pushes: no throttle since the last one, or a client that does not measure it' }, '—')),
        h('td', { class: 'tollgate' }, buckets.length ? buckets.map(bucketLine) : h('span', { class: 'none' }, 'no quota applies')),
        h('td', { class: 'reported' }, latency.length ? latency : h('span', { class: 'none' }, '—')),
        h('td', { class: 'num' }, count(c.instances)),
        h('td', {}, timeCell(c.last_push, now)));
    }));
  }

  // renderTenants lists each tenant's ceilings (GET /api/v1/tenants); the
  // panel shows only while some tenant exists.
  function renderTenants(t) {
    const ts = Array.isArray(t.tenants) ? t.tenants.filter((x) => x && typeof x === 'object') : [];
    $('tenants').hidden = ts.length === 0;
    $('foot-tenants').hidden = ts.length === 0;
    const rows = [];
    for (const tn of ts) {
      const name = String(tn.name ?? '');
      const us = Array.isArray(tn.usage) ? tn.usage.filter((u) => u && typeof u === 'object') : [];
      const who = [tn.source === 'config' ? badge('info', 'config file', 'declared in the config file: changed only there') : null,
        tn.shadow ? badge('warn', 'shadow', 'the whole tenant is in shadow mode: its ceilings are computed, never enforced') : null]
        .filter(Boolean).flatMap((b, i) => (i ? [' ', b] : [b]));
      if (us.length === 0) {
        rows.push(h('tr', { dataset: { tenant: name } },
          h('td', {}, h('span', { class: 'mono' }, name), ' ', ...who),
          h('td', { colspan: 7 }, h('span', { class: 'none' }, 'no ceiling (counted in the usage ledger only)'))));
        continue;
      }
      us.forEach((u, i) => {
        const k = String(u.quota ?? '');
        const shadowed = u.shadow && u.shadowed ? shadowText(u.shadowed) : null;
        rows.push(h('tr', { class: !u.shadow && isNum(u.utilization) && u.utilization >= 1 ? 'hot' : null, dataset: { tenant: name, quota: k } },
          h('td', {}, ...(i === 0 ? [h('span', { class: 'mono' }, name), ' ', ...who] : [])),
          h('td', {}, h('span', { class: 'mono' }, k)),
          h('td', { class: 'num' }, unit(k, u.ceiling)),
          h('td', { class: 'num' }, unit(k, u.rate)),
          h('td', { class: 'num ' + utilClass(u.utilization) }, pct(u.utilization)),
          h('td', { class: 'num' }, count(u.active_principals)),
          h('td', { class: 'num' }, unit(k, u.fair_share)),
          h('td', {}, shadowed ? h('span', { class: 'shadow' }, shadowed)
            : isNum(u.throttled) && u.throttled > 0 ? `${count(u.throttled)} responses, ${duration(u.throttle_ms_total)} in all`
              : h('span', { class: 'none' }, 'none'))));
      });
    }
    $('tenants-body').replaceChildren(...rows);
  }

  let telemetryOn = false;

  function setTelemetry(on) {
    telemetryOn = on;
    $('telemetry').hidden = !on;
    $('foot-telemetry').hidden = !on;
  }

  // setCluster shows or hides everything that only a Tollgate cluster has.
  function setCluster(on) {
    inCluster = on;
    $('cluster').hidden = !on;
    $('foot-cluster').hidden = !on;
    const th = $('throttled-rate-h');
    th.textContent = on ? 'Cluster rate' : 'Rate';
    if (on) th.title = CLUSTER_HINT + '; below it, this instance\'s part'; else th.removeAttribute('title');
    $('top-hint').textContent = 'Busiest buckets by utilization: rate against quota, as recorded by this page (up to 2 minutes)' +
      (on ? '. ' + CLUSTER_HINT + '.' : '');
  }

  function renderCluster(st, now) {
    const ms = Array.isArray(st.instances) ? st.instances.filter((m) => m && typeof m === 'object') : [];
    const live = isNum(st.live) ? st.live : ms.length;
    const selfID = String(st.instance_id ?? '');
    $('cluster-summary').replaceChildren('Cluster ', h('span', { class: 'mono' }, String(st.cluster_id ?? '')),
      ` · ${count(live)} live instance${live === 1 ? '' : 's'} · as instance `, h('span', { class: 'mono' }, selfID), ' sees it');

    // The warning is an alert: replaced only when it changes, so that a
    // screen reader hears it once.
    const differ = st.config_digests_differ === true;
    if (differ !== lastClusterWarn) {
      lastClusterWarn = differ;
      const warn = $('cluster-warn');
      warn.hidden = !differ;
      warn.replaceChildren(...(differ ? [h('strong', {}, 'The instances\' config files declare different quotas. '),
        'A client\'s quota can depend on the instance it connects to; the Config quotas column below tells the files apart. ',
        'Give every instance the same ', h('code', {}, 'quotas:'), ' in its config file.'] : []));
    }

    const lg = st.config_log && typeof st.config_log === 'object' ? st.config_log : {};
    const x = st.exchange && typeof st.exchange === 'object' ? st.exchange : {};
    const logParts = [lg.ready ? badge('ok', 'ready') : badge('warn', 'not ready', 'still reading the shared configuration topic: quota changes are refused until it has'),
      h('span', { class: 'sub' }, 'topic ', h('span', { class: 'mono' }, String(lg.topic ?? '')), ' · next offset ', count(lg.next_offset)),
      lg.last_applied ? h('span', { class: 'sub' }, 'last change applied ', ago(now - Date.parse(lg.last_applied))) : null,
      lg.error ? h('span', { class: 'sub err-text' }, 'error: ' + lg.error) : null];
    $('cluster-facts').replaceChildren(
      fact('Cluster id', h('span', { class: 'mono' }, String(st.cluster_id ?? ''))),
      fact('This instance', h('span', { class: 'mono' }, selfID)),
      fact('Live instances', count(live)),
      fact('Usage exchange', st.connected === true
        ? badge('ok', 'connected', 'this instance hears the exchange: its own reports come back')
        : badge('bad', 'cut off', 'this instance does not hear the exchange: it counts the others at the rate it last heard from them, and its own share of each quota moves to quota ÷ live instances')),
      fact('Config log', ...logParts),
      fact('Reports', `${count(x.reports_published)} published`, isNum(x.reports_failed) && x.reports_failed > 0 ? h('span', { class: 'nz' }, ` (${count(x.reports_failed)} failed)`) : '',
        h('span', { class: 'sub' }, `${count(x.reports_received)} received`, isNum(x.reports_rejected) && x.reports_rejected > 0 ? ` · ${count(x.reports_rejected)} rejected` : '')),
      fact('Exchange traffic', `${bytes(x.bytes_published)} out · ${bytes(x.bytes_received)} in`,
        h('span', { class: 'sub' }, `${count(x.entries_published)} bucket entries published`)));

    const self = ms.find((m) => m.self === true);
    const selfDigest = self ? self.config_digest : undefined;
    const body = $('instances-body');
    if (ms.length === 0) {
      body.replaceChildren(h('tr', { class: 'empty-row' }, h('td', { colspan: 6 }, 'No instance known yet.')));
      return;
    }
    body.replaceChildren(...ms.map((m) => {
      const differs = differ && selfDigest !== undefined && m.config_digest !== selfDigest;
      return h('tr', { class: m.self ? 'self' : null, dataset: { instance: String(m.instance_id ?? '') } },
        h('td', {}, h('span', { class: 'mono' }, String(m.instance_id ?? '')),
          m.self ? [' ', badge('info', 'this instance')] : null),
        h('td', {}, m.version ? h('span', { class: 'mono' }, String(m.version)) : h('span', { class: 'none' }, '—')),
        h('td', {}, m.admin_addr ? h('span', { class: 'mono' }, String(m.admin_addr)) : h('span', { class: 'none' }, '—')),
        h('td', {}, m.config_digest ? h('span', { class: 'mono' }, String(m.config_digest)) : h('span', { class: 'none' }, '—'),
          differs ? [' ', badge('warn', 'differs', 'declares other quotas than this instance\'s config file')] : null),
        h('td', {}, timeCell(m.joined, now)),
        h('td', {}, m.self ? h('span', { class: 'none' }, 'this instance') : timeCell(m.last_seen, now)));
    }));
  }

  // ---------- resolve ----------

  async function runResolve(q, quiet) {
    const out = $('resolve-out');
    const p = new URLSearchParams({ user: q.user, client_id: q.client_id });
    if (q.ip) p.set('ip', q.ip);
    let r;
    try {
      r = await getJSON('api/v1/resolve?' + p.toString());
    } catch (e) {
      if (!quiet || resolveQuery === q) out.replaceChildren(h('p', { class: 'err' }, 'Cannot resolve: ' + e.message));
      if (!quiet) {
        resolveQuery = null;
        $('resolve-sr').textContent = 'Cannot resolve: ' + e.message;
      }
      return;
    }
    if (resolveQuery !== q) return; // a newer query was submitted
    const qs = Array.isArray(r.quotas) ? r.quotas : [];
    const rows = qs.map((x) => {
      const none = !x.level || x.level === 'none';
      return h('tr', { dataset: { quota: x.quota } },
        h('td', { class: 'mono' }, x.quota),
        h('td', {}, none ? h('span', { class: 'none' }, 'no quota') : [entityNode(x.entity),
          h('span', { class: 'sub' }, levelText(x.level)),
          x.bucket_client_id_prefix
            ? h('span', { class: 'sub' }, 'bucket: shared by every client-id starting with ', h('span', { class: 'mono' }, x.bucket_client_id_prefix))
            : h('span', { class: 'sub' }, 'bucket: user ', tag(x.bucket_user, 'user'), ', client-id ', tag(x.bucket_client_id, 'client-id')),
          x.shadow ? h('span', { class: 'sub bucket-note' }, shadowText(x.shadowed)) : null]),
        h('td', { class: 'num' }, none ? h('span', { class: 'none' }, 'unlimited') : limitText(x.quota, x.value)),
        h('td', { class: 'num' }, none ? '' : [unit(x.quota, x.rate), isNum(x.value) ? h('span', { class: 'sub util ' + utilClass(x.utilization) }, pct(x.utilization)) : null,
          part(x)]));
    });
    const parts = [h('p', { class: 'hint' }, 'For user ', h('span', { class: 'mono' }, r.user ?? q.user),
      ', client-id ', r.client_id ? h('span', { class: 'mono' }, r.client_id) : h('span', { class: 'dflt' }, 'empty'), ':'),
    h('div', { class: 'table-wrap' }, h('table', { id: 'resolve-table' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Quota'), h('th', { scope: 'col' }, 'Applies'),
        h('th', { scope: 'col', class: 'num' }, 'Limit'), h('th', { scope: 'col', class: 'num' }, inCluster ? 'Cluster rate now' : 'Rate now'))),
      h('tbody', {}, rows)))];
    if (r.ip && typeof r.ip === 'object') {
      const ip = r.ip;
      const has = isNum(ip.value);
      parts.push(h('p', { class: 'ipline' },
        h('span', { class: 'mono' }, 'connection_creation_rate'), ' for ', h('span', { class: 'mono' }, ip.ip), ': ',
        has ? [h('strong', {}, unit('connection_creation_rate', ip.value)), ' from ', entityNode(ip.entity)] : h('span', { class: 'none' }, 'unlimited (no ip quota applies)'),
        isNum(ip.rate) ? ` · now ${sig(ip.rate)} conn/s` : '',
        isNum(ip.connections) ? ` · ${count(ip.connections)} open connection${ip.connections === 1 ? '' : 's'}` : ''));
    }
    out.replaceChildren(...parts);
    if (!quiet) $('resolve-sr').textContent = `Resolved ${qs.length} quota keys for user ${q.user}.`;
  }

  function setupResolve() {
    $('resolve-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const user = $('r-user').value.trim() || 'ANONYMOUS';
      resolveQuery = { user, client_id: $('r-client').value, ip: $('r-ip').value.trim() };
      $('resolve-out').replaceChildren(h('p', { class: 'empty' }, 'Resolving…'));
      runResolve(resolveQuery, false);
    });
  }

  // ---------- status and the poll loop ----------

  let lastBanner = '';
  let lastState = '';

  function setStatus(errors, now) {
    const st = $('status');
    const banner = $('banner');
    const state = errors.length === 0 ? 'live' : 'stale';
    st.className = 'status ' + state;
    $('status-text').textContent = state === 'live'
      ? 'Live · updated ' + clock(new Date(now))
      : lastOK ? 'Stale · last update ' + clock(new Date(lastOK)) : 'No data';
    // Screen readers hear state changes only, not the clock every second.
    if (state !== lastState) {
      $('status-sr').textContent = state === 'live' ? 'Dashboard is live.' : 'Dashboard data is stale.';
      lastState = state;
    }
    const text = errors.map((e) => e.path + ': ' + e.message).join('\n');
    if (text === lastBanner) return;
    lastBanner = text;
    if (errors.length === 0) {
      banner.hidden = true;
      banner.replaceChildren();
      return;
    }
    banner.replaceChildren(
      h('strong', {}, 'The API is not answering as it should. '),
      h('span', {}, lastOK ? 'Showing the last data received; ' : ''),
      h('span', {}, 'retrying every second.'),
      h('ul', {}, errors.map((e) => h('li', {}, h('span', { class: 'mono' }, e.path), ': ' + e.message))));
    banner.hidden = false;
  }

  async function tick() {
    const now = Date.now();
    const paths = ['api/v1/buckets', 'api/v1/connections', 'api/v1/audit', 'api/v1/cluster', 'api/v1/telemetry', 'api/v1/tenants'];
    // /api/v1/cluster answers 404 outside a Tollgate cluster, and
    // /api/v1/telemetry 503 with telemetry.enabled false (and
    // /api/v1/tenants without tenant management): no panel, not an error.
    const absent = { 'api/v1/cluster': 404, 'api/v1/telemetry': 503, 'api/v1/tenants': 503 };
    const get = (p) => (absent[p]
      ? getJSON(p).catch((e) => { if (e.status === absent[p]) return false; throw e; })
      : getJSON(p));
    const res = await Promise.allSettled(paths.map(get));
    const errors = [];
    res.forEach((r, i) => { if (r.status === 'rejected') errors.push({ path: '/' + paths[i], message: r.reason.message }); });
    const [b, c, a, cl, tm, tn] = res.map((r) => (r.status === 'fulfilled' ? r.value : null));

    // The cluster first: it says what the bucket rates are.
    if (cl === false) {
      if (inCluster) setCluster(false);
    } else if (cl) {
      try {
        if (!inCluster) setCluster(true);
        renderCluster(cl, now);
      } catch (e) {
        errors.push({ path: '/api/v1/cluster', message: 'cannot show: ' + e.message });
      }
    }
    $('cluster').classList.toggle('stale', cl === null);

    await refreshSuggestions(now);
    let throttled = 0;
    let buckets = null;
    if (b) {
      buckets = Array.isArray(b.buckets) ? b.buckets.filter((x) => x && typeof x === 'object') : [];
      try {
        record(buckets, now);
        renderTop(buckets, now);
        throttled = renderThrottled(buckets, now);
      } catch (e) {
        errors.push({ path: '/api/v1/buckets', message: 'cannot show: ' + e.message });
      }
    }
    $('top').classList.toggle('stale', !b);
    $('throttled').classList.toggle('stale', !b);
    if (tm === false) {
      if (telemetryOn) setTelemetry(false);
    } else if (tm) {
      try {
        if (!telemetryOn) setTelemetry(true);
        renderTelemetry(tm, now);
      } catch (e) {
        errors.push({ path: '/api/v1/telemetry', message: 'cannot show: ' + e.message });
      }
    }
    $('telemetry').classList.toggle('stale', tm === null);
    if (tn === false) {
      $('tenants').hidden = true;
    } else if (tn) {
      try { renderTenants(tn); } catch (e) { errors.push({ path: '/api/v1/tenants', message: 'cannot show: ' + e.message }); }
    }
    $('tenants').classList.toggle('stale', tn === null);
    if (c) {
      try { renderConnections(c); } catch (e) { errors.push({ path: '/api/v1/connections', message: 'cannot show: ' + e.message }); }
    }
    $('connections').classList.toggle('stale', !c);
    if (a) {
      try { renderAudit(a, now); } catch (e) { errors.push({ path: '/api/v1/audit', message: 'cannot show: ' + e.message }); }
    }
    $('audit').classList.toggle('stale', !a);
    try { renderTiles(buckets, throttled, c); } catch (_) { /* tiles are a summary only */ }
    if (resolveQuery) runResolve(resolveQuery, true);

    if (errors.length === 0) lastOK = now;
    if (waitingForKey) {
      document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
      return; // the key form says what is wrong; no error banner
    }
    setStatus(errors, now);
    document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
  }

  async function loop() {
    const t0 = Date.now();
    if (waitingForKey) {
      setTimeout(loop, 200);
      return;
    }
    try {
      await tick();
    } catch (e) {
      setStatus([{ path: 'dashboard', message: e && e.message ? e.message : String(e) }], Date.now());
    }
    setTimeout(loop, Math.max(100, POLL_MS - (Date.now() - t0)));
  }

  setupKey();
  setupResolve();
  loop();
})();
