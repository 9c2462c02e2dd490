// Per connection: a header (counts per state), the goodput over time, and the EV map:
// one block per plane, one row per T1 in it, one cell per EV in its state.
// Cells are built when a connection's EV set changes and only re-classed otherwise, so
// 8 connections x 256 EVs cost a few attribute writes per frame.
"use strict";
window.MRC = window.MRC || {};

MRC.conns = (function () {
  const STATES = ["GOOD", "SKIP", "ASSUMED_BAD", "DENIED"];
  const SHORT = { GOOD: "good", SKIP: "skip", ASSUMED_BAD: "bad", DENIED: "denied" };
  const SVG = "http://www.w3.org/2000/svg";
  const views = {}; // conn id -> {root, cells: {ev: span}, key, chart, head}
  let t1Names = {}, graphReady = false;

  function setGraph(graph) {
    t1Names = {};
    for (const n of graph.nodes) if (n.role === "t1") t1Names[n.plane + "/" + n.index] = n.name;
    graphReady = true;
  }

  function div(cls, parent, text) {
    const e = document.createElement("div");
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  function buildMap(v, evs) {
    v.map.textContent = "";
    v.cells = {};
    const planes = {};
    for (const e of evs) ((planes[e[1]] = planes[e[1]] || {})[e[2]] = planes[e[1]][e[2]] || []).push(e);
    for (const p of Object.keys(planes).sort((a, b) => a - b)) {
      const block = div("plane-block", v.map);
      div("plane-title", block, "plane " + p);
      for (const t1 of Object.keys(planes[p]).sort((a, b) => a - b)) {
        const row = div("t1-row", block);
        row.setAttribute("data-plane", p);
        row.setAttribute("data-t1", t1);
        const label = div("t1-label", row);
        label.textContent = t1Names[p + "/" + t1] || "T1 " + t1;
        const sum = div("t1-sum", label);
        const cells = div("cells", row);
        for (const e of planes[p][t1]) {
          const c = document.createElement("span");
          c.className = "ev";
          c.setAttribute("data-ev", e[0]);
          c.setAttribute("data-plane", p);
          c.setAttribute("data-t1", t1);
          cells.appendChild(c);
          v.cells[e[0]] = c;
        }
        row.sum = sum;
      }
    }
  }

  function chart(svg, points, t, window_, faults) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const W = 300, H = 92, L = 44, B = 16;
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    let top = 1;
    for (const p of points) top = Math.max(top, p[1]);
    const nice = Math.pow(10, Math.floor(Math.log10(top)));
    top = Math.ceil(top / nice) * nice;
    const t0 = Math.max(0, t - window_), span = Math.max(window_ / 60, t - t0, 1e-9);
    const x = (s) => L + ((s - t0) / span) * (W - L - 4), y = (v) => 4 + (1 - v / top) * (H - B - 8);
    const mk = (name, attrs) => {
      const e = document.createElementNS(SVG, name);
      for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
      svg.appendChild(e);
      return e;
    };
    mk("line", { x1: L, y1: y(0), x2: W - 4, y2: y(0), class: "axis" });
    mk("line", { x1: L, y1: y(top), x2: W - 4, y2: y(top), class: "grid" });
    mk("text", { x: L - 4, y: y(top) + 4, class: "tick", "text-anchor": "end" }).textContent = MRC.fabric.fmtRate(top).replace(" Mbit/s", "M").replace(" Gbit/s", "G");
    mk("text", { x: L - 4, y: y(0) + 3, class: "tick", "text-anchor": "end" }).textContent = "0";
    mk("text", { x: L, y: H - 3, class: "tick" }).textContent = "−" + MRC.fmtS(span);
    mk("text", { x: W - 4, y: H - 3, class: "tick", "text-anchor": "end" }).textContent = "now";
    for (const f of faults) {
      if (f < t0 || f > t) continue;
      mk("line", { x1: x(f), y1: 2, x2: x(f), y2: y(0), class: "faultline" });
    }
    if (points.length > 1) {
      mk("polyline", { points: points.map((p) => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1)).join(" "), class: "gp" });
    }
  }

  function update(box, frame, windowS) {
    if (!graphReady) return;
    const seen = new Set();
    const faultTimes = (frame.events || []).filter((e) => e.kind === "fault_injected").map((e) => e.t);
    if (frame.conns.length && box.querySelector(".empty")) box.textContent = "";
    for (const c of frame.conns) {
      seen.add(c.id);
      let v = views[c.id];
      if (!v) {
        const root = div("conn");
        root.setAttribute("data-conn", c.id);
        const head = div("conn-head", root);
        const body = div("conn-body", root);
        const left = div("conn-chart", body);
        const svg = document.createElementNS(SVG, "svg");
        left.appendChild(svg);
        const map = div("evmap", body);
        v = views[c.id] = { root, head, svg, map, cells: {}, key: "" };
      }
      box.appendChild(v.root); // keeps the frame's order: active first
      v.root.classList.toggle("idle", !c.active);
      const key = c.evs.map((e) => e[0]).join(",");
      if (key !== v.key) {
        buildMap(v, c.evs);
        v.key = key;
      }
      const rows = {};
      for (const e of c.evs) {
        const cell = v.cells[e[0]];
        const cls = "ev s-" + SHORT[e[3]] + (e[4] || e[3] !== "GOOD" ? "" : " backup"); // a retired EV is out of rotation too
        if (cell.className !== cls) cell.className = cls;
        if (cell.getAttribute("data-state") !== e[3]) cell.setAttribute("data-state", e[3]);
        cell.dataset.sent = e[5];
        cell.dataset.lost = e[6];
        cell.dataset.active = e[4];
        const k = e[1] + "/" + e[2];
        const r = (rows[k] = rows[k] || { n: 0, bad: 0, lost: 0 });
        r.n++;
        if (e[3] === "ASSUMED_BAD" || e[3] === "DENIED") r.bad++;
        r.lost += e[6];
      }
      for (const row of v.map.querySelectorAll(".t1-row")) {
        const r = rows[row.getAttribute("data-plane") + "/" + row.getAttribute("data-t1")] || { n: 0, bad: 0, lost: 0 };
        row.sum.textContent = r.bad ? `${r.bad}/${r.n} out` : `${r.n} EVs`;
        row.classList.toggle("row-bad", r.bad > 0);
      }
      const counts = STATES.map((s) => `<span class="cnt s-${SHORT[s]}">${c.counts[s] || 0} ${s}</span>`).join(" ");
      const gp = c.goodput.length ? c.goodput[c.goodput.length - 1][1] : 0;
      v.head.innerHTML = `<b>${esc(c.src)} → ${esc(c.dst)}</b> <span class="mode">${esc(c.mode)}</span> ` +
        `<span class="gpnow">${c.active ? MRC.fabric.fmtRate(gp) : "idle"}</span> · ${c.evs.length} EVs: ${counts}`;
      chart(v.svg, c.goodput, frame.t, windowS, faultTimes);
    }
    for (const id of Object.keys(views)) {
      if (!seen.has(id)) {
        views[id].root.remove();
        delete views[id];
      }
    }
  }

  function esc(s) {
    return String(s).replace(/[&<>"']/g, (ch) => "&#" + ch.charCodeAt(0) + ";");
  }

  function cellTip(cell) {
    const ev = cell.getAttribute("data-ev"), p = cell.getAttribute("data-plane"), t1 = cell.getAttribute("data-t1");
    const st = cell.getAttribute("data-state");
    return `<b>EV ${ev}</b> · plane ${p} · ${esc(t1Names[p + "/" + t1] || "T1 " + t1)}<br>` +
      `<span class="cnt s-${SHORT[st] || "good"}">${st}</span> ${cell.dataset.active === "1" ? "in rotation" : "backup (not in rotation)"}<br>` +
      `data packets sent ${cell.dataset.sent} · lost ${cell.dataset.lost}`;
  }

  function legend(box) {
    box.innerHTML = STATES.map((s) => `<span class="ev s-${SHORT[s]}"></span> ${s}`).join(" &nbsp; ") +
      ` &nbsp; <span class="ev s-good backup"></span> backup EV (outside the rotation)`;
  }

  return { setGraph, update, cellTip, legend, esc };
})();
