
(function(){
  'use strict';
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var byKey = {};
  data.cells.forEach(function(c){ byKey[c.requirement + '\u0000' + c.target] = c; });
  var panel = document.getElementById('panel');
  function el(tag, text){ var e = document.createElement(tag); if (text !== undefined) e.textContent = text; return e; }
  function show(rid){
    var req = data.requirements[rid] || {id: rid, title: '', rule: '', source: '', level: '', family: ''};
    panel.innerHTML = '';
    var close = el('button', 'close'); close.className = 'close';
    close.addEventListener('click', function(){ panel.className = ''; });
    panel.appendChild(close);
    panel.appendChild(el('h2', rid));
    panel.appendChild(el('p', req.title));
    var meta = el('p', [req.level, req.family, req.role].filter(Boolean).join(' \u00b7 '));
    meta.className = 'muted'; panel.appendChild(meta);
    panel.appendChild(el('pre', req.rule || '(no rule text: not in the catalogue)'));
    panel.appendChild(el('p', 'Source: ' + (req.source || 'unknown')));
    data.targets.forEach(function(target){
      var cell = byKey[rid + '\u0000' + target];
      if (!cell) return;
      panel.appendChild(el('h3', target + ': ' + cell.verdict));
      panel.appendChild(el('p', 'last run ' + cell.last_run + ' (' + cell.last_started + '), seed ' +
        (cell.seed === null ? '-' : cell.seed) + ', code ' + (cell.code_version || '-')));
      if (cell.note) panel.appendChild(el('p', cell.note));
      var ul = el('ul');
      cell.tests.forEach(function(t){
        var li = el('li', t.verdict + ' \u2014 ' + t.test + (t.seed !== null ? ' (seed ' + t.seed + ')' : ''));
        if (t.message) { li.appendChild(el('pre', t.message)); }
        if (t.operations.length) { li.appendChild(el('div', 'operations: ' + t.operations.join(', ') +
          (t.history ? ' in ' + t.history : ''))); }
        ul.appendChild(li);
      });
      panel.appendChild(ul);
      if (cell.failing_operations.length) {
        panel.appendChild(el('p', 'Failing operations (history indexes): ' + cell.failing_operations.join(', ')));
      }
      if (cell.anomalies.length) {
        panel.appendChild(el('p', 'History anomalies:'));
        var al = el('ul');
        cell.anomalies.slice(0, 200).forEach(function(a){
          al.appendChild(el('li', a.kind + ' \u2014 ' + a.test + ' ' + (a.destination || '') + ' producer ' +
            (a.producer || '-') + ' seq ' + a.seq + ': operations ' + a.operations.join(', ') +
            (a.verdict ? ' [' + a.verdict + ': ' + a.reason + ']' : (a.reason ? ' [' + a.reason + ']' : ''))));
        });
        panel.appendChild(al);
      }
      if (cell.timeline.length > 1) {
        panel.appendChild(el('p', 'Timeline: ' + cell.timeline.map(function(t){
          return t.started + ' ' + t.verdict; }).join(' \u2192 ')));
      }
    });
    panel.className = 'open';
  }
  Array.prototype.forEach.call(document.querySelectorAll('tr.req'), function(row){
    row.addEventListener('click', function(){ show(row.getAttribute('data-req')); });
  });
  var filter = document.getElementById('filter');
  filter.addEventListener('input', function(){
    var q = filter.value.toLowerCase();
    Array.prototype.forEach.call(document.querySelectorAll('tr.req'), function(row){
      row.style.display = row.textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none';
    });
  });
  function fromHash(){
    var m = /^#req=(.+)$/.exec(window.location.hash);
    if (m) show(decodeURIComponent(m[1]));
  }
  window.addEventListener('hashchange', fromHash);
  fromHash();
  document.body.setAttribute('data-ready', 'true');
})();
