/* memsim explorer: the question list, its filters and the question view, from the JSON document in
   #explore-data (written by harness/explore). Plain JavaScript, no library, no network: the page works from
   file://. The view lives in the URL fragment: #q=<probe id>&rows=<a>,<b>. */
(function () {
  'use strict';
  var t0 = performance.now();
  var D = JSON.parse(document.getElementById('explore-data').textContent);
  var ROWS = D.rows.map(function (r) { return r.name; });
  var ROW_AT = {};
  ROWS.forEach(function (r, i) { ROW_AT[r] = i; });
  var N = {}; D.meta.numbers.forEach(function (m, i) { N[m] = i; });
  var QAT = {}; D.questions.forEach(function (q, i) { QAT[q.id] = i; });
  var state = {q: null, rows: D.defaults.slice(), visible: []};
  var $ = function (id) { return document.getElementById(id); };

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) { Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); }); }
    if (text !== undefined && text !== null) { e.textContent = text; }
    return e;
  }
  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c];
    });
  }

  /* ---------------------------------------------------------------- rebuilding delivered texts */
  function render(tokens, f) {
    var out = '';
    for (var i = 0; i < tokens.length; i++) {
      var tok = tokens[i];
      if (Array.isArray(tok)) { if (f[tok[0]]) { out += render(tok[1], f); } }
      else if (tok === '@' || tok === '#') { continue; }
      else if (tok.charAt(0) === '$') { out += f[tok.slice(1)] || ''; }
      else { out += tok; }
    }
    return out;
  }
  function escapeAs(s, how) { return how === 'json' ? JSON.stringify(s).slice(1, -1) : s; }
  function dates(c) {
    if (!c._dates) { c._dates = {}; c.sessions.forEach(function (s) { c._dates[s[0]] = s[1]; }); }
    return c._dates;
  }
  function unitText(c, i) {
    c._u = c._u || {};
    if (c._u[i] === undefined) {
      var u = c.units[i], t = c.turns[u[0]];
      var f = {id: t[0], speaker: t[1], text: t[2], caption: t[3] || '', date: dates(c)[t[4]] || ''};
      c._u[i] = escapeAs(render(D.templates[u[1]], f), D.escapes[u[2]]);
    }
    return c._u[i];
  }
  /* A delivery as segments [text, turn (-1: none), whole unit?]; blocks memoised per conversation. */
  function segments(c, codes, out) {
    c._b = c._b || {};
    for (var i = 0; i < codes.length; i++) {
      var code = codes[i], k = code % 4, j = (code - k) / 4;
      if (k === 0) { out.push([c.lits[j], -1, false]); }
      else if (k === 1) { out.push([unitText(c, j), c.units[j][0], true]); }
      else if (k === 2) {
        var s = c.slices[j]; out.push([unitText(c, s[0]).slice(s[1], s[2]), c.units[s[0]][0], false]);
      } else {
        var got = c._b[j];
        if (!got) { got = c._b[j] = []; segments(c, c.blocks[j], got); }
        for (var n = 0; n < got.length; n++) { out.push(got[n]); }
      }
    }
    return out;
  }
  function deliveredText(qi, row) {
    var q = D.questions[qi], d = q.d[ROW_AT[row]];
    if (!d) { return null; }
    return segments(D.convs[q.c], d[0], []).map(function (s) { return s[0]; }).join('');
  }

  /* ---------------------------------------------------------------- marks and the list */
  function mark(q, ri) {
    var m = q.m[ri];
    if (!m) { return 'absent'; }
    if (!q.he || m[N.evidence_recall] === null) { return 'noev'; }
    if (m[N.all_evidence] === true || m[N.all_evidence] === 1) { return 'all'; }
    return m[N.evidence_recall] > 0 ? 'some' : 'none';
  }
  var MARK = {all: ['\u25cf', 'all evidence delivered'], some: ['\u25d0', 'some evidence delivered'],
              none: ['\u25cb', 'no evidence delivered'], noev: ['\u2013', 'no evidence annotated'],
              absent: ['\u00b7', 'row absent for this question']};
  function catLabel(q) {
    var names = {'1': 'multi-hop', '2': 'temporal', '3': 'open-domain', '4': 'single-hop', '5': 'adversarial'};
    return names[q.cat] ? q.cat + ' ' + names[q.cat] : q.cat;
  }
  function buildList() {
    var head = '<tr><th>question</th><th>category / type</th><th title="abstention question">abs.</th>' +
      state.rows.map(function (r) { return '<th class="rowhead" title="' + esc(r) + '"><span>' + esc(r) + '</span></th>'; }).join('') + '</tr>';
    $('qhead').innerHTML = head;
    var html = [];
    D.questions.forEach(function (q, i) {
      var cells = state.rows.map(function (r) {
        var k = mark(q, ROW_AT[r]);
        return '<td class="mark m-' + k + '" data-mark="' + k + '" title="' + esc(r) + ': ' + MARK[k][1] + '">' + MARK[k][0] + '</td>';
      }).join('');
      html.push('<tr data-i="' + i + '"><td><a href="' + esc(link(q.id, state.rows)) + '">' + esc(q.id) +
                '</a><div class="qtext">' + esc(q.q) + '</div></td><td>' + esc(catLabel(q)) + '</td><td>' +
                (q.abs ? 'yes' : '') + '</td>' + cells + '</tr>');
    });
    $('qbody').innerHTML = html.join('');
    applyFilters();
  }

  /* ---------------------------------------------------------------- filters */
  function filterFns() {
    var fns = [], cat = $('f-cat').value, text = $('f-text').value.trim().toLowerCase();
    var a = $('f-a').value, b = $('f-b').value, claim = $('f-claim').value;
    if (cat) { fns.push(function (q) { return q.cat === cat; }); }
    if (text) {
      fns.push(function (q) {
        return q.q.toLowerCase().indexOf(text) >= 0 || String(q.answer === null ? '' : q.answer).toLowerCase().indexOf(text) >= 0 ||
          String(q.adv === null || q.adv === undefined ? '' : q.adv).toLowerCase().indexOf(text) >= 0;
      });
    }
    if (a && b) {
      var ai = ROW_AT[a], bi = ROW_AT[b], ae = N.all_evidence;
      fns.push(function (q) {
        var ma = q.m[ai], mb = q.m[bi];
        return !!ma && !!mb && (ma[ae] === true || ma[ae] === 1) && (mb[ae] === false || mb[ae] === 0);
      });
    }
    if (claim) {
      var ids = {}; D.claims.filter(function (c) { return c.id === claim; })[0].ids.forEach(function (x) { ids[x] = 1; });
      fns.push(function (q) { return ids[q.id] === 1; });
    }
    return fns;
  }
  function applyFilters() {
    var fns = filterFns(), rows = $('qbody').rows, n = 0;
    state.visible = [];
    for (var i = 0; i < rows.length; i++) {
      var q = D.questions[i], ok = true;
      for (var j = 0; j < fns.length && ok; j++) { ok = fns[j](q); }
      rows[i].style.display = ok ? '' : 'none';
      if (ok) { n++; state.visible.push(i); }
    }
    $('f-count').textContent = n + ' of ' + D.questions.length + ' questions shown';
    return n;
  }
  function fillFilters() {
    var cats = {}; D.questions.forEach(function (q) { cats[q.cat] = (cats[q.cat] || 0) + 1; });
    Object.keys(cats).sort().forEach(function (c) {
      $('f-cat').appendChild(el('option', {value: c}, catLabel({cat: c}) + ' (' + cats[c] + ')'));
    });
    ['f-a', 'f-b'].forEach(function (id) {
      ROWS.forEach(function (r) { $(id).appendChild(el('option', {value: r}, r)); });
    });
    D.claims.forEach(function (c) {
      $('f-claim').appendChild(el('option', {value: c.id, title: c.statement}, c.id + ' ' + (c.verdict || '') + ' (' + c.ids.length + ' ids)'));
    });
    if (!D.claims.length) { $('f-claim-wrap').style.display = 'none'; }
    ['f-cat', 'f-a', 'f-b', 'f-claim'].forEach(function (id) { $(id).addEventListener('change', applyFilters); });
    $('f-text').addEventListener('input', applyFilters);
    var picker = $('rowpick');
    ROWS.forEach(function (r, i) {
      var lab = el('label'), box = el('input', {type: 'checkbox', value: r, 'data-row': r});
      box.checked = state.rows.indexOf(r) >= 0;
      box.addEventListener('change', function () {
        var sel = ROWS.filter(function (x) { return picker.querySelector('input[value="' + cssq(x) + '"]').checked; });
        go(state.q, sel);
      });
      lab.appendChild(box); lab.appendChild(document.createTextNode(' ' + r + ' (' + D.rows[i].kind + ')'));
      picker.appendChild(lab);
    });
  }
  function cssq(s) { return s.replace(/["\\]/g, '\\$&'); }

  /* ---------------------------------------------------------------- the fragment */
  function enc(s) { return encodeURIComponent(s).replace(/%2F/g, '/').replace(/%40/g, '@').replace(/%3A/g, ':'); }
  function link(qid, rows) { return '#q=' + enc(qid) + '&rows=' + rows.map(enc).join(','); }
  function parseHash() {
    var out = {q: null, rows: null};
    location.hash.replace(/^#/, '').split('&').forEach(function (kv) {
      var at = kv.indexOf('='); if (at < 0) { return; }
      var k = kv.slice(0, at), v = kv.slice(at + 1);
      if (k === 'q') { out.q = decodeURIComponent(v); }
      if (k === 'rows') { out.rows = v ? v.split(',').map(decodeURIComponent).filter(function (r) { return r in ROW_AT; }) : []; }
    });
    return out;
  }
  function go(qid, rows) {
    var h = qid === null ? '#rows=' + rows.map(enc).join(',') : link(qid, rows);
    if (location.hash === h) { route(); } else { location.hash = h; }
  }
  function route() {
    var h = parseHash(), rowsChanged = false;
    if (h.rows !== null && h.rows.join(',') !== state.rows.join(',')) { state.rows = h.rows; rowsChanged = true; }
    Array.prototype.forEach.call($('rowpick').querySelectorAll('input'), function (b) { b.checked = state.rows.indexOf(b.value) >= 0; });
    $('rowcount').textContent = state.rows.length + ' of ' + ROWS.length;
    if (rowsChanged) { buildList(); }
    state.q = h.q !== null && h.q in QAT ? h.q : null;
    if (state.q === null) { $('view').hidden = true; $('list').hidden = false; return; }
    showQuestion(QAT[state.q]);
  }

  /* ---------------------------------------------------------------- the question view */
  function turnRow(c, ti) {
    var t = c.turns[ti];
    return [t[0], t[1], dates(c)[t[4]] || '', t[2] + (t[3] ? ' [photo: ' + t[3] + ']' : '')];
  }
  function showQuestion(qi) {
    var q = D.questions[qi], c = D.convs[q.c];
    $('list').hidden = true; $('view').hidden = false;
    $('v-id').textContent = q.id;
    $('v-meta').textContent = catLabel(q) + (q.abs ? ' \u00b7 abstention' : '') + ' \u00b7 question ' + (qi + 1) + ' of ' + D.questions.length;
    $('v-q').textContent = q.q;
    var last = c.sessions.length ? c.sessions[c.sessions.length - 1][1] : '';
    $('v-date').textContent = q.date ? q.date : (last ? 'asked after the last session (' + last + ')' : 'asked after the last session');
    $('v-answer-label').textContent = q.gold ? 'gold answer' : (q.adv ? 'adversarial answer (no gold answer)' : 'no gold answer (abstention)');
    $('v-answer').textContent = q.gold ? String(q.answer) : (q.adv || q.answer || '');
    var evb = $('v-ev'); evb.innerHTML = '';
    if (!q.ev.length) { evb.appendChild(el('tr', null)).appendChild(el('td', {colspan: 4}, 'no evidence annotated')); }
    q.ev.forEach(function (ti) {
      var tr = el('tr'); turnRow(c, ti).forEach(function (v) { tr.appendChild(el('td', null, v)); }); evb.appendChild(tr);
    });
    var panels = $('panels'); panels.innerHTML = '';
    state.rows.forEach(function (r) { panels.appendChild(panel(q, c, r)); });
    panels.className = 'panels n' + Math.min(state.rows.length, 3);
    Array.prototype.forEach.call(panels.querySelectorAll('pre.text'), function (pre) {
      var m = pre.querySelector('mark'); if (m) { pre.scrollTop = Math.max(0, m.offsetTop - 40); }
    });
    document.title = q.id + ' \u00b7 memsim explorer';
  }
  function fmt(v, digits) { return v === null || v === undefined ? 'n/a' : (typeof v === 'number' ? (digits === 0 ? String(v) : v.toFixed(digits)) : String(v)); }
  function panel(q, c, r) {
    var ri = ROW_AT[r], m = q.m[ri], d = q.d[ri], info = D.rows[ri];
    var sec = el('section', {'class': 'panel', 'data-row': r});
    var h = el('h3', null, r); h.appendChild(el('small', null, ' ' + info.arm + ' \u00b7 ' + info.kind)); sec.appendChild(h);
    if (!m || !d) { sec.appendChild(el('p', {'class': 'absent'}, 'this row has no delivery for this question')); return sec; }
    var k = mark(q, ri);
    sec.appendChild(el('p', {'class': 'facts'}, MARK[k][0] + ' ' + MARK[k][1] + ' \u00b7 evidence ' + fmt(m[N.evidence_hits], 0) + ' of ' +
      fmt(m[N.n_evidence], 0) + ' \u00b7 ' + fmt(m[N.tokens_cl100k], 0) + ' tokens (cl100k) \u00b7 stored recall ' + fmt(m[N.stored_recall], 2)));
    var credited = {}; d[1].forEach(function (ti) { credited[ti] = 1; });
    var evset = {}; q.ev.forEach(function (ti) { evset[ti] = 1; });
    var segs = segments(c, d[0], []);
    var whole = {}, part = {};
    segs.forEach(function (s) { if (s[1] >= 0 && evset[s[1]]) { (s[2] && credited[s[1]] ? whole : part)[s[1]] = 1; } });
    var stored = c.stored[r] ? {} : null;
    if (stored) { c.stored[r].forEach(function (ti) { stored[ti] = 1; }); }
    var ul = el('ul', {'class': 'evlist'});
    q.ev.forEach(function (ti) {
      var id = c.turns[ti][0], status, note = '';
      if (credited[ti]) { status = 'delivered'; if (!whole[ti]) { note = ' (credited by the arm; its text is not verbatim here)'; } }
      else if (stored === null) { status = 'missed'; }
      else { status = stored[ti] ? 'stored-not-delivered' : 'not-stored'; }
      if (!credited[ti] && part[ti]) { note = ' (appears cut or escaped: not counted)'; }
      var rank = '';
      if (d[2]) { var at = d[2].indexOf(ti); rank = at >= 0 ? ' \u00b7 rank ' + (at + 1) : ' \u00b7 not in the top ' + d[2].length; }
      var label = {'delivered': 'delivered', 'missed': 'missed', 'stored-not-delivered': 'stored, not delivered', 'not-stored': 'not stored'}[status];
      var li = el('li', {'class': 'ev-' + status, 'data-ev': id, 'data-status': status}, id + ': ' + label + rank + note);
      li.addEventListener('click', function () {
        var m = sec.querySelector('mark[data-turn="' + cssq(id) + '"]'); if (m) { m.parentNode.scrollTop = Math.max(0, m.offsetTop - 40); }
      });
      ul.appendChild(li);
    });
    if (q.ev.length) { sec.appendChild(ul); }
    var pre = el('pre', {'class': 'text', tabindex: '0'}), buf = [];
    var flush = function () { if (buf.length) { pre.appendChild(document.createTextNode(buf.join(''))); buf = []; } };
    segs.forEach(function (s) {
      if (s[1] >= 0 && evset[s[1]]) {
        flush();
        var hit = s[2] && credited[s[1]];
        pre.appendChild(el('mark', {'class': hit ? 'hit' : 'cut', 'data-turn': c.turns[s[1]][0],
          title: c.turns[s[1]][0] + (hit ? ': evidence, delivered' : ': evidence, cut or escaped (not counted)')}, s[0]));
      } else { buf.push(s[0]); }
    });
    flush();
    sec.appendChild(pre);
    return sec;
  }

  /* ---------------------------------------------------------------- keys, start */
  function step(delta) {
    var vis = state.visible; if (!vis.length) { return; }
    var cur = state.q === null ? -1 : vis.indexOf(QAT[state.q]);
    var next = cur < 0 ? (delta > 0 ? vis[0] : vis[vis.length - 1]) : vis[Math.max(0, Math.min(vis.length - 1, cur + delta))];
    go(D.questions[next].id, state.rows);
  }
  document.addEventListener('keydown', function (e) {
    var tag = (e.target && e.target.tagName) || '';
    if (tag === 'INPUT' || tag === 'SELECT' || tag === 'TEXTAREA' || e.ctrlKey || e.metaKey || e.altKey) { return; }
    if (e.key === 'j') { step(1); } else if (e.key === 'k') { step(-1); }
    else if (e.key === 'Escape' && state.q !== null) { go(null, state.rows); }
  });
  $('back').addEventListener('click', function (e) { e.preventDefault(); go(null, state.rows); });
  $('next').addEventListener('click', function (e) { e.preventDefault(); step(1); });
  $('prev').addEventListener('click', function (e) { e.preventDefault(); step(-1); });
  window.addEventListener('hashchange', route);
  fillFilters();
  var h0 = parseHash();
  if (h0.rows !== null) { state.rows = h0.rows; }
  buildList();
  route();
  window.memsimExplore = {
    listShownMs: performance.now(), scriptMs: performance.now() - t0, questions: D.questions.length, rows: ROWS,
    text: function (qid, row) { return deliveredText(QAT[qid], row); },
    applyFilters: applyFilters, visibleIds: function () { return state.visible.map(function (i) { return D.questions[i].id; }); }
  };
})();
