// The run's fidelity verdict in the header: did this machine keep up with the fabric it
// emulates (topologies.fidelity)? Green "faithful", red "not faithful", with the monitor's
// reasons and figures on hover; hidden where no monitor ran (a simulated run).
"use strict";
window.MRC = window.MRC || {};

MRC.fidelity = {
  update(frame) {
    const el = document.getElementById("fidelity");
    const f = frame.fidelity || {};
    if (!f.verdict) { el.hidden = true; return; }
    el.hidden = false;
    el.textContent = f.faithful ? "faithful" : "not faithful";
    el.className = "status " + (f.faithful ? "ok" : "bad");
    el.title = f.verdict + (f.line ? "\n" + f.line : "");
    el.setAttribute("data-faithful", f.faithful ? "1" : "0");
  },
};
