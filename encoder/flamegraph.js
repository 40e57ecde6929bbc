(function () {
var svg = document.documentElement;
var W = +svg.getAttribute('width'), XPAD = @XPAD@, FW = @FW@;
var frames = document.getElementById('frames');
var details = document.getElementById('details');
var unzoomBtn = document.getElementById('unzoom');
var searchBtn = document.getElementById('search');
var matched = document.getElementById('matched');
var items = [], gs = frames.getElementsByTagName('g');
for (var i = 0; i < gs.length; i++) {
  var g = gs[i], r = g.getElementsByTagName('rect')[0];
  var title = g.getElementsByTagName('title')[0].textContent;
  var cut = title.lastIndexOf(' (');
  g.setAttribute('data-i', i);
  items.push({g: g, r: r, t: g.getElementsByTagName('text')[0],
    x: +r.getAttribute('x'), w: +r.getAttribute('width'),
    y: +r.getAttribute('y'), fill: r.getAttribute('fill'),
    title: title, name: cut > 0 ? title.slice(0, cut) : title});
}
function fit(it, x, w) {
  it.r.setAttribute('x', x.toFixed(2));
  it.r.setAttribute('width', w.toFixed(2));
  it.t.setAttribute('x', (x + 3).toFixed(2));
  var n = Math.floor((w - 6) / FW);
  it.t.textContent = n < 3 ? '' : it.name.length <= n ? it.name :
    it.name.slice(0, n - 2) + '..';
}
var E = 0.01;
var zoomed = null;
function zoom(z) {
  zoomed = z;
  var full = W - 2 * XPAD, scale = full / z.w;
  for (var i = 0; i < items.length; i++) {
    var it = items[i], show = false;
    if (it.y > z.y) {
      if (it.x <= z.x + E && it.x + it.w >= z.x + z.w - E) {
        show = true; fit(it, XPAD, full);
      }
    } else if (it.x >= z.x - E && it.x + it.w <= z.x + z.w + E) {
      show = true; fit(it, XPAD + (it.x - z.x) * scale, it.w * scale);
    }
    it.g.style.display = show ? '' : 'none';
  }
  unzoomBtn.setAttribute('visibility', 'visible');
  svg.setAttribute('data-zoomed', z.name);
}
function unzoom() {
  zoomed = null;
  for (var i = 0; i < items.length; i++) {
    fit(items[i], items[i].x, items[i].w);
    items[i].g.style.display = '';
  }
  unzoomBtn.setAttribute('visibility', 'hidden');
  svg.removeAttribute('data-zoomed');
}
function itemOf(e) {
  for (var n = e.target; n && n !== frames; n = n.parentNode)
    if (n.getAttribute && n.getAttribute('data-i') !== null)
      return items[+n.getAttribute('data-i')];
  return null;
}
frames.addEventListener('click', function (e) {
  var it = itemOf(e);
  if (!it) return;
  if (it === items[0]) unzoom(); else zoom(it);
});
frames.addEventListener('mouseover', function (e) {
  var it = itemOf(e);
  if (it) details.textContent = it.title;
});
frames.addEventListener('mouseout', function () {
  details.textContent = ' ';
});
unzoomBtn.addEventListener('click', unzoom);
var searching = false;
function search(re) {
  var spans = [];
  for (var i = 0; i < items.length; i++) {
    var it = items[i], hit = re !== null && re.test(it.name);
    it.r.setAttribute('fill', hit ? 'rgb(230,0,230)' : it.fill);
    it.g.setAttribute('class', hit ? 'f m' : 'f');
    if (hit) spans.push([it.x, it.x + it.w]);
  }
  searching = re !== null;
  searchBtn.textContent = searching ? 'Reset Search' : 'Search';
  if (!searching) { matched.textContent = ' '; return; }
  spans.sort(function (a, b) { return a[0] - b[0]; });
  var sum = 0, end = -1;
  for (var j = 0; j < spans.length; j++) {
    var s = Math.max(spans[j][0], end);
    if (spans[j][1] > s) { sum += spans[j][1] - s; end = spans[j][1]; }
  }
  matched.textContent = 'Matched: ' +
    (100 * sum / (W - 2 * XPAD)).toFixed(1) + '%';
}
function ask() {
  if (searching) { search(null); return; }
  var term = prompt('Search for (regular expression):', '');
  if (term) {
    try { search(new RegExp(term)); } catch (err) { alert(err); }
  }
}
searchBtn.addEventListener('click', ask);
window.addEventListener('keydown', function (e) {
  if ((e.ctrlKey || e.metaKey) && e.keyCode === 70) {
    e.preventDefault(); ask();
  } else if (e.keyCode === 27) { search(null); unzoom(); }
});
function widen() {
  var nw = Math.max(400, Math.floor(window.innerWidth || 0));
  if (!window.innerWidth || nw === W) return;
  var f = (nw - 2 * XPAD) / (W - 2 * XPAD);
  for (var i = 0; i < items.length; i++) {
    items[i].x = XPAD + (items[i].x - XPAD) * f; items[i].w *= f;
  }
  W = nw;
  var H = +svg.getAttribute('height');
  svg.setAttribute('width', W);
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  document.getElementById('background').setAttribute('width', W);
  document.getElementById('title').setAttribute('x', W / 2);
  document.getElementById('subtitle').setAttribute('x', W / 2);
  searchBtn.setAttribute('x', W - XPAD);
  matched.setAttribute('x', W - XPAD);
  if (zoomed) zoom(zoomed); else unzoom();
}
widen();
window.addEventListener('resize', widen);
var z0 = svg.getAttribute('data-zoom');
if (z0) {
  try {
    var zre = new RegExp(z0);
    for (var k = 1; k < items.length; k++)
      if (zre.test(items[k].name)) { zoom(items[k]); break; }
  } catch (err) { }
}
var initial = svg.getAttribute('data-search');
if (initial) {
  try { search(new RegExp(initial)); } catch (err) { }
}
svg.setAttribute('data-ready', items.length);
})();
