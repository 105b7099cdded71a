// A small SVG line chart drawn with DOM calls (no library): series of [time ms, value] points
// over a fixed window; null values leave gaps. Series are told apart by the Okabe-Ito palette
// (console.css .s0-.s7, safe for colour-blind readers) and, past its 8 colours, by dashes.

const NS = "http://www.w3.org/2000/svg";
const WIDTH = 480;
const HEIGHT = 160;
const PAD = { left: 48, right: 8, top: 8, bottom: 22 };

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

const COLOURS = 8;
const DASHES = ["", "6 3", "2 2", "8 3 2 3"];

// How series number i is drawn: a colour class, and a dash pattern once the colours run out.
export function seriesStyle(i) {
  const dash = DASHES[Math.floor(i / COLOURS) % DASHES.length];
  return { className: `s${i % COLOURS}`, dash };
}

// A series keeps the style it asks for (`style`, so a kind is always drawn alike), else its position.
const styleOf = (s, i) => seriesStyle(s.style ?? i);

function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 2.5, 5, 10].map((m) => m * power).find((m) => m >= value);
}

function label(value) {
  if (value >= 1000) return `${(value / 1000).toFixed(value >= 10000 ? 0 : 1)}k`;
  return Number.isInteger(value) ? String(value) : value.toFixed(value < 0.1 ? 3 : 2);
}

// series: [{name, points: [[ms, value|null], ...], style?}]; returns an <svg> with one path each.
export function lineChart({ title, series, fromMs, toMs, unit = "", ends = ["-15 min", "now"] }) {
  const root = svg("svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: "chart", role: "img", "aria-label": title });
  const values = series.flatMap((s) => s.points.map((p) => p[1]).filter((v) => v !== null));
  const top = niceMax(Math.max(0, ...values));
  const x = (ms) => PAD.left + ((ms - fromMs) / (toMs - fromMs)) * (WIDTH - PAD.left - PAD.right);
  const y = (v) => HEIGHT - PAD.bottom - (v / top) * (HEIGHT - PAD.top - PAD.bottom);
  for (const tick of [0, top / 2, top]) {
    root.append(
      svg("line", { x1: PAD.left, x2: WIDTH - PAD.right, y1: y(tick), y2: y(tick), class: "grid" }),
      svg("text", { x: PAD.left - 4, y: y(tick) + 4, class: "axis", "text-anchor": "end" }, `${label(tick)}${unit}`),
    );
  }
  for (const [ms, text] of [[fromMs, ends[0]], [toMs, ends[1]]]) {
    root.append(svg("text", { x: x(ms), y: HEIGHT - 6, class: "axis", "text-anchor": ms === fromMs ? "start" : "end" }, text));
  }
  series.forEach((s, i) => {
    const { className, dash } = styleOf(s, i);
    const dashed = dash ? { "stroke-dasharray": dash } : {};
    // A point with no drawn neighbour (the first sample, or one between gaps) is a dot: a
    // path of one point draws nothing.
    let d = "";
    let run = [];
    const endRun = () => {
      if (run.length === 1) root.append(svg("circle", { cx: run[0][0], cy: run[0][1], r: 2.5, class: `dot ${className}`, "data-series": s.name }));
      run = [];
    };
    for (const [ms, value] of s.points) {
      if (value === null || ms < fromMs) {
        endRun();
        continue;
      }
      const point = [x(ms).toFixed(1), y(value).toFixed(1)];
      d += `${run.length ? "L" : "M"}${point[0]},${point[1]} `;
      run.push(point);
    }
    endRun();
    root.append(svg("path", { d: d || "M0,0", class: `line ${className}`, "data-series": s.name, ...dashed }));
  });
  return root;
}

export function legend(series) {
  const list = document.createElement("ul");
  list.className = "legend";
  series.forEach((s, i) => {
    const item = document.createElement("li");
    const { className, dash } = styleOf(s, i);
    item.className = dash ? `${className} dashed` : className;
    item.textContent = s.name;
    list.append(item);
  });
  return list;
}
