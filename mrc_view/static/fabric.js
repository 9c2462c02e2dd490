// The Clos drawn by plane: T1s on top, T0s below, the hosts' NIC ports at the bottom.
// Built once from the graph (/api/info), then every frame only changes attributes:
// a link's colour (load), its dashes (a fault), a switch's state (down, unreachable).
"use strict";
window.MRC = window.MRC || {};

MRC.fabric = (function () {
  const SVG = "http://www.w3.org/2000/svg";
  const NODE_W = 74, NODE_H = 24, COL_W = 92, ROW_Y = { t1: 46, t0: 150, host: 254 }, PANEL_H = 290;
  let links = {}, nodes = {}, linkMbps = 0, peak = 1, onPick = null;

  function el(name, attrs, parent) {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (parent) parent.appendChild(e);
    return e;
  }

  // load (0..1) -> colour: grey when idle, then blue, teal, amber, red at the link's rate
  function loadColour(x) {
    if (!(x > 0.002)) return "#c5cad3";
    const stops = [[0, [70, 130, 200]], [0.35, [40, 170, 160]], [0.7, [240, 170, 30]], [1, [215, 50, 40]]];
    x = Math.min(1, x);
    for (let i = 1; i < stops.length; i++) {
      if (x <= stops[i][0]) {
        const [x0, c0] = stops[i - 1], [x1, c1] = stops[i], f = (x - x0) / (x1 - x0);
        return "rgb(" + c0.map((c, j) => Math.round(c + f * (c1[j] - c))).join(",") + ")";
      }
    }
    return "rgb(215,50,40)";
  }

  function build(svg, graph, mbps, pick) {
    linkMbps = mbps || 0;
    onPick = pick;
    links = {};
    nodes = {};
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const byPlane = [];
    for (let p = 0; p < graph.planes; p++) byPlane.push({ t1: [], t0: [], host: [] });
    const hosts = graph.nodes.filter((n) => n.role === "host").sort((a, b) => a.index - b.index);
    for (const n of graph.nodes) if (n.role !== "host") byPlane[n.plane][n.role].push(n);
    const widest = Math.max(1, hosts.length, ...byPlane.map((p) => Math.max(p.t1.length, p.t0.length)));
    const panelW = widest * COL_W + 30;
    const cols = graph.planes <= 2 ? graph.planes : Math.min(graph.planes, Math.max(2, Math.floor(1400 / panelW)));
    const rows = Math.ceil(graph.planes / cols);
    svg.setAttribute("viewBox", `0 0 ${cols * panelW} ${rows * PANEL_H}`);
    svg.setAttribute("data-planes", graph.planes);
    const pos = {}; // "plane/node" -> [x, y]
    byPlane.forEach((tiers, p) => {
      const ox = (p % cols) * panelW, oy = Math.floor(p / cols) * PANEL_H;
      el("rect", { x: ox + 4, y: oy + 4, width: panelW - 8, height: PANEL_H - 8, rx: 8, class: "plane-bg" }, svg);
      const label = el("text", { x: ox + 14, y: oy + 22, class: "plane-label" }, svg);
      label.textContent = "plane " + p;
      for (const role of ["t1", "t0", "host"]) {
        const list = role === "host" ? hosts : tiers[role].sort((a, b) => a.index - b.index);
        const off = ox + 15 + (panelW - 30 - list.length * COL_W) / 2 + COL_W / 2;
        list.forEach((n, i) => { pos[p + "/" + n.name] = [off + i * COL_W, oy + ROW_Y[role]]; });
      }
    });
    const linkLayer = el("g", { class: "links" }, svg), nodeLayer = el("g", { class: "nodes" }, svg);
    for (const l of graph.links) {
      const a = pos[l.plane + "/" + l.a], b = pos[l.plane + "/" + l.b];
      if (!a || !b) continue;
      const g = el("g", { class: "link", "data-link": l.name, "data-state": "ok" }, linkLayer);
      const line = el("line", { x1: a[0], y1: a[1] - NODE_H / 2, x2: b[0], y2: b[1] + NODE_H / 2, class: "wire" }, g);
      const mark = el("text", { x: (a[0] + b[0]) / 2, y: (a[1] + b[1]) / 2 + 5, class: "xmark" }, g);
      mark.textContent = "✕";
      el("line", { x1: a[0], y1: a[1], x2: b[0], y2: b[1], class: "hit" }, g);
      g.addEventListener("click", (e) => onPick && onPick({ type: "link", name: l.name, a: l.a, b: l.b, plane: l.plane }, e));
      g.addEventListener("mousemove", (e) => MRC.tip.show(e, linkTip(l.name)));
      g.addEventListener("mouseleave", () => MRC.tip.hide());
      links[l.name] = { g, line, mark, a: l.a, b: l.b, rate: [0, 0], faults: [] };
    }
    for (const [key, [x, y]] of Object.entries(pos)) {
      const [plane, name] = key.split("/");
      const n = graph.nodes.find((m) => m.name === name);
      const g = el("g", { class: "node " + (n.role === "host" ? "host" : "switch " + n.role), "data-node": name,
                          "data-plane": plane, "data-state": "up" }, nodeLayer);
      el("rect", { x: x - NODE_W / 2, y: y - NODE_H / 2, width: NODE_W, height: NODE_H, rx: n.role === "host" ? 12 : 4 }, g);
      const t = el("text", { x: x, y: y + 4 }, g);
      t.textContent = name;
      g.addEventListener("mousemove", (e) => MRC.tip.show(e, nodeTip(name)));
      g.addEventListener("mouseleave", () => MRC.tip.hide());
      if (n.role !== "host") g.addEventListener("click", (e) => onPick && onPick({ type: "switch", name }, e));
      (nodes[name] = nodes[name] || []).push(g);
    }
  }

  let lastFrame = null;
  function linkTip(name) {
    const l = links[name];
    const f = lastFrame ? (lastFrame.faults || []).filter((x) => (x.links || []).includes(name)) : [];
    const lines = [`<b>${name}</b>`, `${l.a} → ${l.b}: ${fmtRate(l.rate[0])}`, `${l.b} → ${l.a}: ${fmtRate(l.rate[1])}`];
    for (const x of f) lines.push(`<span class="bad">fault ${x.id}: ${x.kind} ${x.direction} ${x.detail || ""}</span>`);
    if (l.down) lines.push(`<span class="bad">a switch on it is down</span>`);
    return lines.join("<br>");
  }
  function nodeTip(name) {
    const st = lastFrame ? (lastFrame.switches[name] || lastFrame.agents[name] || "") : "";
    const f = lastFrame ? (lastFrame.faults || []).filter((x) => (x.switches || []).includes(name)) : [];
    const lines = [`<b>${name}</b>`, st ? "state: " + st : ""];
    for (const x of f) lines.push(`<span class="bad">fault ${x.id}: ${x.kind}</span>`);
    return lines.filter(Boolean).join("<br>");
  }
  function fmtRate(m) {
    if (!(m > 0)) return "idle";
    return m >= 1000 ? (m / 1000).toFixed(2) + " Gbit/s" : m.toFixed(m >= 10 ? 0 : 1) + " Mbit/s";
  }

  function update(frame) {
    lastFrame = frame;
    const down = new Set(frame.down || []);
    let top = 0;
    for (const r of Object.values(frame.links || {})) top = Math.max(top, r[0], r[1]);
    peak = linkMbps > 0 ? linkMbps : Math.max(peak * 0.995, top, 1); // no link rate: scale to the busiest
    for (const [name, l] of Object.entries(links)) {
      const r = (frame.links || {})[name] || [0, 0];
      l.rate = r;
      const faulted = (frame.faults_on || {})[name];
      l.down = down.has(l.a) || down.has(l.b);
      const state = faulted ? "fault" : l.down ? "down" : "ok";
      if (l.g.getAttribute("data-state") !== state) l.g.setAttribute("data-state", state);
      const load = Math.max(r[0], r[1]) / peak;
      l.g.setAttribute("data-load", load.toFixed(3));
      l.line.setAttribute("stroke", state === "ok" ? loadColour(load) : state === "fault" ? "#d62728" : "#9aa0a6");
      l.line.setAttribute("stroke-width", state === "ok" ? (2 + 5 * Math.min(1, load)).toFixed(1) : 3);
    }
    for (const [name, gs] of Object.entries(nodes)) {
      const st = frame.switches[name] || frame.agents[name] || "up";
      const faulted = (frame.faults_on || {})[name];
      let state = "up";
      if (faulted) state = "down"; // switch_down: a fault takes every port
      else if (st !== "up" && st !== "alive") state = st; // unreachable, silent, restarting, dead, absent
      for (const g of gs) if (g.getAttribute("data-state") !== state) g.setAttribute("data-state", state);
    }
    return peak;
  }

  function legend(box) {
    box.textContent = "";
    const bar = document.createElement("span");
    bar.className = "loadbar";
    box.appendChild(document.createTextNode("load "));
    box.appendChild(bar);
    const scale = document.createElement("span");
    scale.id = "loadscale";
    box.appendChild(scale);
    const f = document.createElement("span");
    f.className = "lg-fault";
    f.textContent = "✕ fault";
    box.appendChild(f);
    const d = document.createElement("span");
    d.className = "lg-down";
    d.textContent = "switch down";
    box.appendChild(d);
  }

  return { build, update, legend, fmtRate, loadColour };
})();
