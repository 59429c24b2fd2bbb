"use strict";
// laneway's status page: reads status.json (same origin) every second and draws it. Every
// text comes from the server's JSON and goes in as text, never as markup. A number shown
// carries data-k (its path in the JSON) and data-v (its value), so a test can compare them.
(function () {
  const EVERY_MS = 1000;
  const SVG = "http://www.w3.org/2000/svg";
  const main = document.getElementById("main");
  let last = null;

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value !== null && value !== undefined && value !== false) el.setAttribute(name, value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      el.append(child instanceof Node ? child : String(child));
    }
    return el;
  }
  function s(tag, attrs) {
    const el = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attrs || {})) el.setAttribute(name, value);
    return el;
  }

  const integer = new Intl.NumberFormat(undefined, {maximumFractionDigits: 0});
  const decimal = new Intl.NumberFormat(undefined, {maximumFractionDigits: 1});
  function count(v) { return v === null || v === undefined ? "–" : integer.format(v); }
  function rate(v) { return v === null || v === undefined ? "–" : decimal.format(v) + "/s"; }
  function bytes(v) {
    if (v === null || v === undefined) return "–";
    const units = ["B", "kB", "MB", "GB"];
    let i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return decimal.format(v) + " " + units[i];
  }
  function duration(v) {
    if (v === null || v === undefined) return "–";
    if (v < 1) return decimal.format(v * 1000) + " ms";
    if (v < 90) return decimal.format(v) + " s";
    if (v < 5400) return Math.floor(v / 60) + " min " + Math.round(v % 60) + " s";
    return Math.floor(v / 3600) + " h " + Math.round((v % 3600) / 60) + " min";
  }
  function clock(t) { return new Date(t * 1000).toLocaleTimeString(); }
  function plain(v) { return v === null || v === undefined ? "–" : String(v); }

  // A number bound to its path in the JSON (see the header comment).
  function num(path, value, format) {
    const bound = path === null ? {} : {"data-k": path, "data-v": JSON.stringify(value)};
    return h("span", bound, (format || count)(value));
  }
  function kpi(label, path, value, format, sub) {
    return h("div", {class: "kpi"}, h("div", {class: "label"}, label),
      h("div", {class: "value"}, num(path, value, format)), sub ? h("div", {class: "sub"}, sub) : null);
  }
  function card(title, ...body) { return h("section", {class: "card"}, h("h2", {}, title), ...body); }
  function table(head, rows, empty) {
    if (!rows.length) return h("div", {class: "empty"}, empty || "none");
    const cells = head.map(([label, cls]) => h("th", {class: cls || null}, label));
    return h("div", {class: "scroll"}, h("table", {}, h("thead", {}, h("tr", {}, cells)), h("tbody", {}, rows)));
  }
  function td(content, cls) { return h("td", {class: cls || null}, content); }

  function chart(ago, series, labels) {
    const width = 1000, height = 160;
    const svg = s("svg", {class: "chart", viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none",
      role: "img", "aria-label": labels.join(" and ") + " over the last " + duration(ago[0] || 0)});
    const span = Math.max(1, ago[0] || 1);
    const top = Math.max(1, ...series.flat());
    const x = (a) => width * (1 - a / span);
    const y = (v) => height - 2 - (height - 6) * (v / top);
    svg.append(s("line", {class: "grid", x1: 0, x2: width, y1: y(0), y2: y(0)}));
    svg.append(s("line", {class: "grid", x1: 0, x2: width, y1: y(top), y2: y(top)}));
    series.forEach((values, i) => {
      if (!values.length) return;
      const points = values.map((v, j) => `${x(ago[j]).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
      if (i === 0) {
        svg.append(s("polygon", {class: "area",
          points: `${x(ago[0]).toFixed(1)},${y(0)} ${points} ${x(ago[ago.length - 1]).toFixed(1)},${y(0)}`}));
      }
      svg.append(s("polyline", {class: i === 0 ? "line" : "line2", points}));
    });
    const names = labels[0] + " (line)" + (labels[1] ? ", " + labels[1] + " (dashed)" : "");
    return h("div", {}, h("div", {class: "legend"}, "top " + count(top)), svg,
      h("div", {class: "legend axis"}, h("span", {}, "-" + duration(span)), h("span", {}, names), h("span", {}, "now")));
  }
  function spark(values) {
    const svg = s("svg", {class: "spark", viewBox: "0 0 90 22", preserveAspectRatio: "none", "aria-hidden": "true"});
    if (values.length > 1) {
      const top = Math.max(1, ...values);
      const points = values.map((v, i) => `${(88 * i / (values.length - 1) + 1).toFixed(1)},${(21 - 19 * v / top).toFixed(1)}`);
      svg.append(s("polyline", {class: "line", points: points.join(" ")}));
    }
    return svg;
  }
  function trend(path, value) {
    if (value === null || value === undefined) return "–";
    const arrow = value > 0.05 ? "▲ " : value < -0.05 ? "▼ " : "";
    const el = num(path, value, rate);
    el.prepend(arrow);
    el.className = value > 0.05 ? "up" : value < -0.05 ? "down" : "";
    return el;
  }
  function tag(text, cls) { return h("span", {class: "tag " + (cls || "")}, text); }

  function lists(doc, base) {
    return Object.entries(doc.lists || {}).map(([name, list]) => {
      const columns = [...new Set(list.entries.flatMap(Object.keys))];
      const rows = list.entries.map((entry, i) => h("tr", {}, columns.map((c) => {
        const v = entry[c];
        const isNumber = typeof v === "number";
        return td(isNumber ? num(`${base}lists.${name}.entries.${i}.${c}`, v, Number.isInteger(v) ? count : decimal.format) :
          plain(typeof v === "object" && v !== null ? JSON.stringify(v) : v), isNumber ? null : "text");
      })));
      return card(list.title, table(columns.map((c) => [c.replace(/_/g, " "), "text"]), rows));
    });
  }
  function failures(items, base) {
    const rows = items.map((f, i) => h("tr", {},
      td(clock(f.at), "text"), td(`${f.topic}[${f.partition}]`, "text"), td(num(`${base}.${i}.offset`, f.offset)),
      td(f.error_type, "text"), td(f.error_message, "wrap"), td(num(`${base}.${i}.attempts`, f.attempts)),
      td(h("code", {}, plain(f.trace_id)), "text"), td(f.outcome, "text")));
    return table([["time", "text"], ["partition", "text"], ["offset"], ["error", "text"], ["message", "text"],
      ["attempts"], ["trace id", "text"], ["outcome", "text"]], rows, "no message given up on");
  }
  function rebalances(items, who) {
    const rows = items.map((r) => h("tr", {}, td(clock(r.at), "text"), who ? td(r.member, "text") : null,
      td(tag(r.kind, r.kind === "lost" ? "bad" : r.kind === "revoked" ? "warn" : "ok"), "text"),
      td(r.partitions.join(", "), "wrap")));
    return table([["time", "text"], ...(who ? [["member", "text"]] : []), ["change", "text"], ["partitions", "text"]],
      rows, "none yet");
  }
  function config(rows) {
    return h("details", {class: "card"}, h("summary", {}, "Effective configuration (secrets redacted)"),
      table([["setting", "text"], ["value", "text"], ["from", "text"]],
        rows.map((r) => h("tr", {}, td(r.name, "text"), td(h("code", {}, r.value), "wrap"), td(r.origin, "text")))));
  }

  function member(doc) {
    const c = doc.counters, b = doc.backlog, e = doc.engine;
    document.getElementById("title").textContent = doc.source || "consumer";
    const kpis = h("div", {class: "kpis"},
      kpi("Backlog", "backlog.backlog", b.backlog, count, h("span", {}, "lag ", num("backlog.lag", b.lag))),
      kpi("Time to clear", "backlog.time_to_clear", b.time_to_clear, duration,
        b.slowest ? (b.time_to_clear === null ? "not clearing: " : "slowest ") + b.slowest
          : "at the overall rate " + duration(b.drain_seconds)),
      kpi("Done", "backlog.rate", b.rate, rate, h("span", {}, "trend ", trend("backlog.trend", b.trend))),
      kpi("Processed", "rates.processed", doc.rates.processed, rate, h("span", {}, num("counters.processed", c.processed), " in all")),
      kpi("Failed", "rates.failed", doc.rates.failed, rate, h("span", {}, num("counters.failed", c.failed), " in all")),
      kpi("Dead letters", "rates.dead_lettered", doc.rates.dead_lettered, rate,
        h("span", {}, num("counters.dead_lettered", c.dead_lettered), " in all")),
      kpi("In flight", "counters.in_flight", c.in_flight, count,
        c.concurrency_limit !== null ? h("span", {}, "adaptive limit ", num("counters.concurrency_limit", c.concurrency_limit))
          : "of " + count(e.concurrency) + " (" + e.engine + ")"),
      kpi("Buffered", "counters.buffered", c.buffered, count, "of " + count(e.max_buffered) + ", " + bytes(c.buffered_bytes)),
      kpi("Paused partitions", null, doc.partitions.filter((p) => p.paused).length, count,
        c.paused ? "backpressure: all paused" : ""),
      kpi("Oldest in flight", "counters.oldest_in_flight", c.oldest_in_flight, duration, "ordering " + e.ordering));
    const rows = doc.partitions.map((p, i) => {
      const at = `partitions.${i}.`;
      const tags = [p.paused ? tag("paused", "warn") : null, p.stalled ? tag("stalled", "bad") : null];
      const blocking = p.blocking_offset === null ? "–" :
        h("span", {}, num(at + "blocking_offset", p.blocking_offset), p.blocking_key !== undefined && p.blocking_key !== null ?
          h("code", {}, " key " + p.blocking_key) : null);
      return h("tr", {class: p.stalled ? "stalled" : null, "data-pid": `${p.topic}[${p.partition}]`},
        td([`${p.topic}[${p.partition}]`, ...tags], "text"), td(num(at + "committed", p.committed)), td(num(at + "end", p.end)),
        td(num(at + "lag", p.lag)), td(num(at + "backlog", p.backlog)), td(num(at + "gaps", p.gaps)),
        td(num(at + "oldest_seconds", p.oldest_seconds, duration)), td(blocking), td(num(at + "done_rate", p.done_rate, rate)),
        td(num(at + "time_to_clear", p.time_to_clear, duration)), td(trend(at + "trend", p.trend)), td(spark(p.series)));
    });
    const partitions = card("Partitions", table([["partition", "text"], ["committed"], ["end"], ["lag"], ["backlog"], ["gaps"],
      ["oldest"], ["blocking offset"], ["done/s"], ["time to clear"], ["trend"], ["backlog, 5 min"]], rows, "no partition owned"));
    const workers = doc.workers.length ? card("Process workers",
      h("div", {class: "sub muted"}, "restarts ", num("counters.worker_restarts", c.worker_restarts)),
      table([["pid"], ["resident memory"]], doc.workers.map((w, i) => h("tr", {},
        td(num(`workers.${i}.pid`, w.pid, plain)), td(num(`workers.${i}.rss_bytes`, w.rss_bytes, bytes)))))) : null;
    const latency = Object.entries(doc.latency_ms).map(([k, v]) => `${k} ${decimal.format(v)} ms`).join(", ");
    return [kpis,
      card("Backlog and lag", chart(doc.history.ago, [doc.history.backlog, doc.history.lag], ["backlog", "lag"])),
      partitions, ...lists(doc, ""),
      card("Last messages given up on (never their values)", failures(doc.failures, "failures")),
      card("Rebalances", rebalances(doc.rebalances, false)), workers,
      h("details", {class: "card"}, h("summary", {}, "Counters"),
        h("div", {class: "sub muted"}, "end-to-end latency " + (latency || "–")),
        table([["counter", "text"], ["value"]], Object.entries(c).map(([k, v]) =>
          h("tr", {}, td(k.replace(/_/g, " "), "text"), td(num("counters." + k, v, typeof v === "number" ? decimal.format : plain)))))),
      config(doc.config)];
  }

  function group(doc) {
    const g = doc.totals;
    document.getElementById("title").textContent = `group ${doc.group} on ${doc.where}`;
    const answered = doc.members.filter((m) => m.ok).length;
    const kpis = h("div", {class: "kpis"},
      kpi("Backlog", "totals.backlog", g.backlog, count, h("span", {}, "lag ", num("totals.lag", g.lag))),
      kpi("Time to clear", "totals.time_to_clear", g.time_to_clear, duration,
        g.slowest ? (g.time_to_clear === null ? "not clearing: " : "slowest ") + g.slowest : ""),
      kpi("Done", "totals.done_rate", g.done_rate, rate, h("span", {}, "in ", num("totals.in_rate", g.in_rate, rate))),
      kpi("Members answering", null, answered, count, "of " + doc.members.length),
      kpi("Finished beyond commit", "totals.finished_beyond", g.finished_beyond, count, "skipped after a restart"));
    const members = doc.members.map((m, i) => {
      const at = `members.${i}.`;
      if (!m.ok) {
        return h("tr", {class: "dead", "data-member": m.url}, td(m.url, "text"), td(tag("no answer", "bad"), "text"),
          td(m.error, "wrap"), td(""), td(""), td(""), td(""), td(""), td(""));
      }
      const state = m.ready ? tag("ready", "ok") : tag(m.state, "warn");
      return h("tr", {"data-member": m.url}, td(m.url, "text"), td(state, "text"), td(m.reason || m.partitions.join(", "), "wrap"),
        td(num(at + "rates.processed", m.rates.processed, rate)), td(num(at + "rates.failed", m.rates.failed, rate)),
        td(num(at + "rates.dead_lettered", m.rates.dead_lettered, rate)), td(num(at + "in_flight", m.in_flight)),
        td(num(at + "buffered", m.buffered)), td(num(at + "stalled", m.stalled)));
    });
    const rows = doc.partitions.map((p, i) => {
      const at = `partitions.${i}.`;
      return h("tr", {class: p.stalled ? "stalled" : null, "data-pid": `${p.topic}[${p.partition}]`},
        td([`${p.topic}[${p.partition}]`, p.stalled ? tag("stalled", "bad") : null], "text"),
        td(num(at + "committed", p.committed)), td(num(at + "end", p.end)), td(num(at + "lag", p.lag)),
        td(num(at + "backlog", p.backlog)), td(num(at + "gaps", p.gaps)), td(num(at + "done_rate", p.done_rate, rate)),
        td(num(at + "in_rate", p.in_rate, rate)), td(num(at + "time_to_clear", p.time_to_clear, duration)),
        td(plain(p.member), "text"), td(num(at + "blocking_offset", p.blocking_offset)),
        td(num(at + "oldest_seconds", p.oldest_seconds, duration)), td(spark(p.series)));
    });
    return [kpis,
      doc.note ? h("div", {class: "card muted"}, doc.note) : null,
      card("Group backlog and lag", chart(doc.history.ago, [doc.history.backlog, doc.history.lag], ["backlog", "lag"])),
      card("Members", table([["member", "text"], ["state", "text"], ["partitions", "text"], ["processed"], ["failed"],
        ["dead letters"], ["in flight"], ["buffered"], ["stalled"]], members, "no member given")),
      card("Partitions (Kafka's view, joined with the members')", table([["partition", "text"], ["committed"], ["end"],
        ["lag"], ["backlog"], ["gaps"], ["done/s"], ["in/s"], ["time to clear"], ["member", "text"], ["blocking offset"],
        ["oldest"], ["backlog, 5 min"]], rows, "no partition")),
      ...lists(doc, ""),
      card("Last messages given up on (never their values)", failures(doc.failures, "failures")),
      card("Rebalances", rebalances(doc.rebalances, true))];
  }

  function draw(doc) {
    const pill = document.getElementById("pill");
    const banner = document.getElementById("banner");
    let state = "ok", text = "ready", reason = "";
    if (doc.kind === "member") {
      const health = doc.health;
      reason = health.reason;
      if (!health.ready) { state = health.live ? "warn" : "bad"; text = health.state === "running" ? "not ready" : health.state; }
    } else {
      const dead = doc.members.filter((m) => !m.ok).length;
      if (dead) { state = "warn"; text = dead + " not answering"; }
      reason = doc.error || "";
      if (doc.error) state = "bad";
    }
    pill.className = "pill " + state;
    pill.textContent = text;
    banner.hidden = !reason;
    banner.textContent = reason;
    main.replaceChildren(...(doc.kind === "group" ? group(doc) : member(doc)).filter(Boolean));
    document.body.dataset.rendered = String(doc.at);
  }

  async function refresh() {
    try {
      const answer = await fetch("status.json", {cache: "no-store", headers: {Accept: "application/json"}});
      if (!answer.ok) throw new Error("status.json answered " + answer.status);
      const doc = await answer.json();
      last = Date.now();
      draw(doc);
    } catch (error) {
      const banner = document.getElementById("banner");
      banner.hidden = false;
      banner.textContent = "No answer from the consumer: " + error.message + " (retrying)";
      document.getElementById("pill").className = "pill bad";
      document.getElementById("pill").textContent = "no answer";
    }
  }
  function tick() {
    const updated = document.getElementById("updated");
    updated.textContent = last === null ? "" : "updated " + decimal.format((Date.now() - last) / 1000) + " s ago";
  }
  refresh();
  setInterval(refresh, EVERY_MS);
  setInterval(tick, 250);
})();
