// The page: where frames come from (live: server-sent events; replay: /api/frame at the
// slider's time), the event feed, the tooltip and the fault menu. Every request carries
// the token: the event stream and GETs in the URL, actions in the X-MRC-Token header.
"use strict";
window.MRC = window.MRC || {};

(function () {
  const token = new URLSearchParams(location.search).get("token") || "";
  const $ = (id) => document.getElementById(id);
  const q = (path) => path + (path.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token);
  let info = null, frames = 0, frameTimes = [], rec = 0, lastFrame = null;

  // -- tooltip -------------------------------------------------------------------------------
  MRC.tip = {
    show(e, html) {
      const tip = $("tip");
      tip.innerHTML = html;
      tip.hidden = false;
      const x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
      const y = Math.min(e.clientY + 14, window.innerHeight - tip.offsetHeight - 8);
      tip.style.left = x + "px";
      tip.style.top = y + "px";
    },
    hide() { $("tip").hidden = true; },
  };
  document.addEventListener("mouseover", (e) => {
    const cell = e.target.closest && e.target.closest(".evmap .ev");
    if (cell) MRC.tip.show(e, MRC.conns.cellTip(cell));
  });
  document.addEventListener("mouseout", (e) => {
    if (e.target.closest && e.target.closest(".evmap .ev")) MRC.tip.hide();
  });

  // -- event feed ----------------------------------------------------------------------------
  let feedKey = "";
  function feed(events) {
    const hideSkip = $("hideskip").checked;
    const shown = events.filter((e) => !(hideSkip && e.kind === "ev_states" && /SKIP/.test(e.text)));
    const key = shown.length + ":" + (shown[0] ? shown[0].t + shown[0].text : "") + hideSkip;
    if (key === feedKey) return;
    feedKey = key;
    const ol = $("feed");
    ol.textContent = "";
    for (const e of shown.slice(0, 150)) {
      const li = document.createElement("li");
      li.className = "lv-" + e.level;
      li.setAttribute("data-kind", e.kind);
      const t = document.createElement("span");
      t.className = "ft";
      t.textContent = fmtT(e.t);
      const k = document.createElement("span");
      k.className = "fk";
      k.textContent = e.kind.replace(/_/g, " ");
      const x = document.createElement("span");
      x.textContent = e.text;
      li.append(t, k, x);
      ol.appendChild(li);
    }
  }
  function fmtT(t) {
    if (info && info.started_unix) {
      const d = new Date((info.started_unix + t) * 1000);
      return d.toTimeString().slice(0, 8) + " +" + t.toFixed(1) + "s";
    }
    return "+" + fmtS(t);
  }
  // seconds in the unit a run needs: a simulated run lasts milliseconds
  function fmtS(t) {
    const span = info && info.mode === "replay" ? info.recordings[rec].duration : 60;
    if (span < 0.002) return (t * 1e6).toFixed(1) + " µs";
    if (span < 2) return (t * 1e3).toFixed(2) + " ms";
    return t.toFixed(2) + " s";
  }
  MRC.fmtS = fmtS;

  // -- one frame ------------------------------------------------------------------------------
  function render(frame) {
    lastFrame = frame;
    const peak = MRC.fabric.update(frame);
    $("loadscale").textContent = "0 … " + MRC.fabric.fmtRate(peak) + (info.link_mbps ? " (link rate)" : " (busiest so far)");
    MRC.conns.update($("conns"), frame, info.mode === "replay" ? Math.min(60, info.recordings[rec].duration) : 60);
    feed(frame.events || []);
    MRC.fidelity.update(frame);
    frames++;
    document.body.setAttribute("data-frames", frames);
    document.body.setAttribute("data-t", frame.t);
    $("clock").textContent = "t = " + fmtS(frame.t);
    if (menuTarget) fillMenu();
  }

  // -- live -----------------------------------------------------------------------------------
  function live() {
    const es = new EventSource(q("/api/stream"));
    es.onmessage = (m) => {
      const now = performance.now();
      frameTimes.push(now);
      while (frameTimes.length && frameTimes[0] < now - 2000) frameTimes.shift();
      render(JSON.parse(m.data));
      $("status").textContent = "live · " + (frameTimes.length / 2).toFixed(1) + " updates/s";
      $("status").className = "status ok";
    };
    es.onerror = () => { $("status").textContent = "disconnected: retrying…"; $("status").className = "status bad"; };
    setInterval(() => {
      if (frameTimes.length && performance.now() - frameTimes[frameTimes.length - 1] > 3000) {
        $("status").textContent = "stale: no update for " + ((performance.now() - frameTimes[frameTimes.length - 1]) / 1000).toFixed(0) + " s";
        $("status").className = "status bad";
      }
    }, 1000);
  }

  // -- replay ---------------------------------------------------------------------------------
  // the replay's time: the slider rounds what it is set to to its step, so jumps and play
  // read this instead (a jump to a fault must land on the fault, and the next one after it)
  let playing = false, inFlight = false, wanted = null, now = 0;
  function seek(t) {
    wanted = now = t;
    if (inFlight) return;
    inFlight = true;
    const asked = wanted;
    fetch(q(`/api/frame?rec=${rec}&t=${asked}`)).then((r) => r.json()).then((f) => {
      render(f);
      $("tlabel").textContent = fmtS(asked) + " / " + fmtS(info.recordings[rec].duration);
    }).finally(() => {
      inFlight = false;
      if (wanted !== asked) seek(wanted);
    });
  }
  function replay() {
    $("replaybar").hidden = false;
    const empty = document.querySelector("#conns .empty");
    if (empty) empty.textContent = "no connection at this point of the recording";
    $("fabric-hint").textContent = "replay of a finished run · links coloured by load · red dashes: a fault";
    const sel = $("rec");
    info.recordings.forEach((r, i) => {
      const o = document.createElement("option");
      o.value = i;
      o.textContent = r.name + (r.title ? " — " + r.title : "");
      sel.appendChild(o);
    });
    sel.hidden = info.recordings.length < 2;
    const slider = $("slider");
    const setRec = () => {
      rec = Number(sel.value || 0);
      const r = info.recordings[rec];
      slider.max = r.duration;
      slider.step = r.duration / 2000 || 0.001;
      const marks = $("marks");
      marks.textContent = "";
      for (const f of r.fault_times) {
        const m = document.createElement("span");
        m.className = "mark";
        m.style.left = (100 * f / Math.max(r.duration, 1e-9)) + "%";
        m.title = "fault at " + fmtS(f);
        marks.appendChild(m);
      }
      slider.value = 0;
      seek(0);
      $("nextfault").disabled = !r.fault_times.length;
    };
    sel.onchange = setRec;
    slider.oninput = () => seek(Number(slider.value));
    $("play").onclick = () => {
      playing = !playing;
      $("play").textContent = playing ? "❚❚" : "▶";
      if (playing && now >= Number(slider.max)) { slider.value = 0; now = 0; }
    };
    $("nextfault").onclick = () => {
      const r = info.recordings[rec];
      const next = [...r.fault_times].sort((a, b) => a - b).find((f) => f > now + 1e-9);
      if (next !== undefined) { slider.value = next; seek(next); }
      $("nextfault").disabled = !r.fault_times.some((f) => f > now + 1e-9);
    };
    setInterval(() => {
      if (!playing) return;
      // real time at x1, except that a run shorter than 20 s (a simulation) plays in 20 s
      const dur = Number(slider.max), scale = dur < 20 ? dur / 20 : 1;
      const t = Math.min(dur, now + 0.25 * Number($("speed").value) * scale);
      slider.value = t;
      seek(t);
      if (t >= dur) { playing = false; $("play").textContent = "▶"; }
    }, 250);
    $("status").textContent = "replay";
    $("status").className = "status replay";
    setRec();
  }

  // -- fault menu (live) ----------------------------------------------------------------------
  let menuTarget = null;
  function pick(target, e) {
    if (!info || info.mode !== "live") return;
    menuTarget = target;
    const menu = $("menu");
    menu.hidden = false;
    fillMenu(true);
    menu.style.left = Math.min(e.clientX + 6, window.innerWidth - menu.offsetWidth - 8) + "px";
    menu.style.top = Math.min(e.clientY + 6, window.innerHeight - menu.offsetHeight - 8) + "px";
    e.stopPropagation();
  }
  function button(label, action, parent, cls) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.setAttribute("data-action", action);
    if (cls) b.className = cls;
    parent.appendChild(b);
    return b;
  }
  function fillMenu(fresh) {
    const menu = $("menu"), t = menuTarget;
    const onIt = (lastFrame ? lastFrame.faults : []).filter((f) =>
      t.type === "link" ? (f.links || []).includes(t.name) || f.target === t.name : (f.switches || []).includes(t.name) || f.target === t.name);
    if (!fresh) {
      const list = menu.querySelector(".onit");
      if (list && list.getAttribute("data-key") === onIt.map((f) => f.id).join(",")) return;
    }
    const keep = {}, oldMsg = document.getElementById("menu-msg");
    for (const i of menu.querySelectorAll("input,select")) keep[i.name] = i.value;
    menu.textContent = "";
    const h = document.createElement("div");
    h.className = "menu-title";
    h.textContent = (t.type === "link" ? "link " : "switch ") + t.name;
    menu.appendChild(h);
    const row = document.createElement("div");
    row.className = "menu-row";
    menu.appendChild(row);
    if (t.type === "link") {
      button("black hole", "blackhole", row);
      button("down", "link_down", row);
      button("loss", "loss", row);
      if (t.a && !t.a.match(/t[01]p\d+n\d+$/)) button("NIC port down", "nic_port_down", row);
      const opts = document.createElement("div");
      opts.className = "menu-row";
      opts.innerHTML = `<label>direction <select name="direction"><option>both</option><option value="a2b">a2b (up)</option><option value="b2a">b2a (down)</option></select></label>
        <label>loss p <input name="probability" type="number" min="0" max="1" step="0.01" value="0.1"></label>
        <label>for <input name="duration" type="number" min="0" step="1" value="0"> s (0: until cleared)</label>`;
      menu.appendChild(opts);
    } else {
      button("switch down", "switch_down", row);
      const opts = document.createElement("div");
      opts.className = "menu-row";
      opts.innerHTML = `<label>for <input name="duration" type="number" min="0" step="1" value="0"> s (0: until cleared)</label>`;
      menu.appendChild(opts);
    }
    for (const i of menu.querySelectorAll("input,select")) if (keep[i.name] !== undefined) i.value = keep[i.name];
    const list = document.createElement("div");
    list.className = "onit";
    list.setAttribute("data-key", onIt.map((f) => f.id).join(","));
    for (const f of onIt) {
      const r = document.createElement("div");
      r.className = "menu-row";
      const s = document.createElement("span");
      s.textContent = `${f.id}: ${f.kind} ${f.direction} ${f.detail || ""}`;
      r.appendChild(s);
      button("clear", "clear:" + f.id, r, "clear");
      list.appendChild(r);
    }
    if (!onIt.length) list.textContent = "no fault on it";
    menu.appendChild(list);
    // a refresh keeps the message node itself: an answer still in flight lands where it is read
    let msg = oldMsg && !fresh ? oldMsg : null;
    if (!msg) {
      msg = document.createElement("div");
      msg.className = "menu-msg";
      msg.id = "menu-msg";
    }
    menu.appendChild(msg);
  }
  $("menu").addEventListener("click", (e) => {
    e.stopPropagation();
    const b = e.target.closest("button");
    if (!b) return;
    const action = b.getAttribute("data-action"), t = menuTarget, menu = $("menu");
    const val = (n, d) => { const i = menu.querySelector(`[name=${n}]`); return i ? i.value : d; };
    let path, body;
    if (action.startsWith("clear:")) {
      path = "/api/clear";
      body = { id: action.slice(6) };
    } else {
      let target = t.name;
      if (action === "nic_port_down") target = t.a + ":" + t.plane;
      path = "/api/fault";
      body = { kind: action, target, direction: action === "blackhole" || action === "loss" ? val("direction", "both") : "both",
               probability: action === "loss" ? Number(val("probability", 0.1)) : 0, duration_s: Number(val("duration", 0)) };
    }
    $("menu-msg").textContent = "sending…";
    const where = (t.type === "link" ? "link " : "switch ") + t.name;
    fetch(path, { method: "POST", headers: { "Content-Type": "application/json", "X-MRC-Token": token }, body: JSON.stringify(body) })
      .then(async (r) => {
        const text = await r.text();
        if (!r.ok) throw new Error(text.trim());
        const d = JSON.parse(text);
        // done: the menu gets out of the way of what it changed; the answer stays in view
        closeMenu();
        notice(d.id ? `fault ${d.id} injected on ${where} (click it again to clear it)`
                    : `cleared ${(d.cleared || []).join(", ") || "nothing"} on ${where}`);
      })
      // a refusal keeps the menu open, with the reason, so that the input can be corrected
      .catch((err) => { $("menu-msg").textContent = String(err.message || err); $("menu-msg").className = "menu-msg bad"; });
  });
  function closeMenu() { $("menu").hidden = true; menuTarget = null; }
  let noticeTimer = null;
  function notice(text) {
    const n = $("notice");
    n.textContent = text;
    n.hidden = false;
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(() => { n.hidden = true; }, 8000);
  }
  document.addEventListener("click", closeMenu);
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") closeMenu(); });
  $("hideskip").addEventListener("change", () => { feedKey = ""; if (lastFrame) feed(lastFrame.events || []); });

  // -- start ----------------------------------------------------------------------------------
  fetch(q("/api/info")).then((r) => {
    if (!r.ok) throw new Error(r.status === 403 ? "403: open the URL the view printed (with its token)" : "HTTP " + r.status);
    return r.json();
  }).then((i) => {
    info = i;
    document.body.setAttribute("data-mode", i.mode);
    $("title").textContent = i.title;
    MRC.fabric.legend($("legend"));
    MRC.conns.legend($("evlegend"));
    MRC.fabric.build($("fabric"), i.graph, i.link_mbps, pick);
    MRC.conns.setGraph(i.graph);
    if (i.mode === "live") live(); else replay();
  }).catch((err) => { $("status").textContent = String(err.message || err); $("status").className = "status bad"; });
})();
