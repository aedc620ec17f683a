// mqctl console: one server-sent event stream (/console/stream) keeps every part of the page current.
// No framework, no build step. Text from the servers is only ever set as text, never as HTML.
"use strict";

const state = { snapshot: null, events: [], token: "", pending: null, expanded: new Set() };
const MAX_EVENTS = 2000;
const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function yesNo(flag, yes = "yes", no = "no") {
  return el("span", { class: flag ? "yes" : "no" }, flag ? yes : no);
}

function fmtTime(ms) {
  if (!ms) return "";
  const d = new Date(ms);
  return d.toLocaleString(undefined, { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}

function groupKey(g) { return `${g.clusterName}/${g.brokerName}`; }

// ------------------------------------------------------------------ the stream
function connect() {
  const source = new EventSource("/console/stream");
  source.addEventListener("state", (message) => {
    const data = JSON.parse(message.data);
    setLive(true);
    state.snapshot = data;
    addEvents(data.events || []);
    render();
  });
  source.onerror = () => {
    setLive(false);
    // A broken stream is resumed by the browser; a refused one (the node serves too many) is closed: ask again.
    if (source.readyState === EventSource.CLOSED) setTimeout(connect, 5000);
  };
}

function setLive(up) {
  const badge = $("live");
  badge.textContent = up ? "live" : "reconnecting…";
  badge.className = "badge " + (up ? "live" : "down");
}

function addEvents(events) {
  const known = new Set(state.events.map((e) => e.index));
  for (const e of events) if (!known.has(e.index)) state.events.push(e);
  state.events.sort((a, b) => a.index - b.index);
  if (state.events.length > MAX_EVENTS) state.events.splice(0, state.events.length - MAX_EVENTS);
}

// ------------------------------------------------------------------ rendering
function render() {
  const s = state.snapshot;
  const node = s.node;
  const leader = s.controllers.find((c) => c.isLeader);
  $("node").textContent = `Served by ${node.id} (${node.address}), ${node.isLeader ? "the leader" : "a follower"}` +
    (node.isLeader ? "" : leader ? `; leader ${leader.id} (${leader.address})` : "; no leader known") +
    ` · updated ${fmtTime(s.at)}`;
  renderToken();
  renderGroups(s.groups);
  renderConsumers(s.consumers);
  renderFilter(s.groups);
  renderTimeline();
  renderControllers(s.controllers);
}

function adminAllowed() {
  return !state.snapshot || !state.snapshot.tokenRequired || state.token !== "";
}

function renderToken() {
  const required = state.snapshot.tokenRequired;
  $("token-state").textContent = state.token ? "token set for this page" : "";
  $("token-note").textContent = required
    ? (state.token ? "Admin actions send this token to the controller leader."
                   : "This cluster has an auth token: the console is read-only until you give it.")
    : "This cluster has no auth token: admin actions are open to anyone who reaches a controller.";
}

function renderGroups(groups) {
  const list = $("group-list");
  const focused = document.activeElement && document.activeElement.id;
  if (!groups.length) {
    list.replaceChildren(el("p", { class: "note" }, "No broker group yet."));
    return;
  }
  list.replaceChildren(...groups.map(renderGroup));
  if (focused && $(focused)) $(focused).focus();
}

function renderGroup(g) {
  const key = groupKey(g);
  const id = "grp-" + key.replace(/[^A-Za-z0-9_-]/g, "_");
  const inSync = g.replicas.filter((r) => r.inSync).map((r) => r.brokerId);
  const rows = g.replicas.map((r) => el("tr", { "data-broker-id": r.brokerId, "data-in-sync": String(r.inSync),
                                              "data-alive": String(r.alive) },
    el("td", { class: "num" }, r.brokerId),
    el("td", {}, r.address),
    el("td", {}, r.role === "master" ? el("b", {}, "master") : "slave"),
    el("td", {}, yesNo(r.inSync)),
    el("td", {}, yesNo(r.alive)),
    el("td", { class: "num" }, r.role === "master" ? (g.maxOffset ?? "n/a") : offset(r.ackOffset)),
    el("td", { class: "num" }, r.role === "master" ? "" : lagCell(r.lag)),
    el("td", {}, r.role === "master" ? "" : el("button", {
      id: `${id}-elect-${r.brokerId}`, disabled: !adminAllowed() || !r.alive,
      onclick: () => askElect(g, r) }, `Elect ${r.brokerId}…`))));
  return el("section", { class: "group", id, "aria-labelledby": id + "-title", "data-group": g.brokerName,
                         "data-cluster": g.clusterName, "data-master": g.masterBrokerId ?? "",
                         "data-epoch": g.masterEpoch ?? "", "data-in-sync": inSync.join(",") },
    el("h3", { id: id + "-title" }, key),
    el("ul", { class: "facts" },
      el("li", {}, el("b", {}, "Master: "), g.masterBrokerId == null ? el("span", { class: "no" }, "none")
        : `${g.masterBrokerId} (${g.masterAddress || "?"})`),
      el("li", {}, el("b", {}, "masterEpoch: "), g.masterEpoch ?? ""),
      el("li", {}, el("b", {}, "SyncStateSet: "), `{${inSync.join(", ")}}`, ` (epoch ${g.syncStateSetEpoch ?? ""})`),
      el("li", {}, el("b", {}, "confirmOffset: "), g.confirmOffset ?? "n/a"),
      g.report ? el("li", {}, el("a", { href: g.report }, "Report")) : null),
    el("table", {},
      el("caption", {}, `Replicas of ${key}`),
      el("thead", {}, el("tr", {}, ["Broker id", "Address", "Role", "In SyncStateSet", "Alive", "Offset (ack / max)",
                                    "Lag (bytes)", "Action"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, rows)),
    el("button", { id: `${id}-clean`, class: "danger", disabled: !adminAllowed(), onclick: () => askClean(g) },
       "Clean broker data…"));
}

function offset(value) {
  return value === null || value === undefined ? "n/a" : value < 0 ? "none yet" : value;
}

function lagCell(lag) {
  if (lag === null || lag === undefined) return "n/a";
  return el("span", { class: lag === 0 ? "yes" : "warn" }, lag);
}

function renderControllers(controllers) {
  const sorted = [...controllers].sort((a, b) => a.id.localeCompare(b.id));
  $("controller-table").tBodies[0].replaceChildren(...sorted.map((c) => el("tr", { "data-node": c.id },
    el("td", {}, c.id + (c.thisNode ? " (this node)" : "")),
    el("td", {}, c.address),
    el("td", {}, !c.reachable ? el("span", { class: "no" }, "unreachable") : c.isLeader ? el("b", {}, "leader") : "follower"),
    el("td", {}, c.state ?? ""),
    el("td", { class: "num" }, c.term ?? ""),
    el("td", { class: "num" }, c.commitIndex ?? ""),
    el("td", { class: "num" }, c.lastApplied ?? ""),
    el("td", { class: "num" }, c.appliedEvents ?? ""))));
}

// ------------------------------------------------------------------ consumer groups
const SVG_NS = "http://www.w3.org/2000/svg";

// A group name as part of an id: '%' and '|' (the other characters a group name may have) written as '.' and
// their code, which no group name contains, so that two groups never share an id.
function safeId(text) { return text.replace(/[^A-Za-z0-9_-]/g, (c) => "." + c.charCodeAt(0).toString(16)); }

function known(value, unit = "") {
  return value === null || value === undefined ? "n/a" : `${value}${unit}`;
}

function renderConsumers(view) {
  if (!view) return;
  const note = $("consumers-note");
  const minutes = Math.round(view.windowMs / 60000);
  note.textContent = view.at === null || view.at === undefined
    ? "Asking each master for its consumer groups…"
    : `Asked of each broker group's master every ${view.intervalS} s over RocketMQ's remoting protocol; ` +
      `last answers ${fmtTime(view.at)}. Charts: the last ${minutes} minutes.` +
      (view.groupsTotal > view.groups.length
        ? ` Showing the ${view.groups.length} groups furthest behind of ${view.groupsTotal}.` : "");
  const focused = document.activeElement && document.activeElement.id;
  const body = $("consumer-table").tBodies[0];
  const rows = view.groups.flatMap((g) => consumerRows(g, view));
  body.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 9, class: "note" },
    view.at ? "No consumer group on any master." : "No answer yet."))]));
  $("consumer-brokers").tBodies[0].replaceChildren(...view.brokers.map(brokerAnswerRow));
  if (focused && $(focused)) $(focused).focus();
}

function consumerRows(g, view) {
  const id = "cg-" + safeId(g.group);
  const open = state.expanded.has(g.group);
  const row = el("tr", { "data-consumer-group": g.group, "data-lag": g.lag ?? "",
                         "data-consume-rate": g.consumeRate ?? "" },
    el("th", { scope: "row" }, g.group),
    el("td", { class: "num" }, g.lag === null ? el("span", { class: "no" }, "n/a")
                                               : el("span", { class: g.lag === 0 ? "yes" : "warn" }, g.lag)),
    el("td", { class: "num" }, known(g.consumeRate)),
    el("td", { class: "num" }, known(g.consumeTps)),
    el("td", { class: "num" }, known(g.sendRate)),
    el("td", {}, g.lastConsumed ? fmtTime(g.lastConsumed) : "never"),
    el("td", {}, g.brokers.join(", "),
       g.missing.length ? el("span", { class: "no" }, ` (no stats from ${g.missing.join(", ")})`) : null),
    el("td", { class: "chart" }, consumerChart(g, view, id)),
    el("td", {}, el("button", { id: `${id}-queues`, "aria-expanded": String(open), "aria-controls": `${id}-detail`,
                                onclick: () => toggleQueues(g.group) },
                    open ? "Hide queues" : `Show ${g.queuesTotal} queue${g.queuesTotal === 1 ? "" : "s"}`)));
  if (!open) return [row];
  const shown = g.queues.length < g.queuesTotal ? `the ${g.queues.length} furthest behind of ${g.queuesTotal}` : "all";
  const detail = el("tr", { id: `${id}-detail`, class: "detail" }, el("td", { colspan: 9 },
    el("table", { class: "queues" },
      el("caption", {}, `Queues of ${g.group} (${shown}, furthest behind first)`),
      el("thead", {}, el("tr", {}, ["Topic", "Broker group", "Queue", "Broker offset", "Consumer offset", "Lag",
                                    "Last consumed"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, g.queues.map((q) => el("tr", { "data-topic": q.topic, "data-queue": q.queueId,
                                                     "data-broker": q.brokerName, "data-lag": q.lag },
        el("td", {}, q.topic), el("td", {}, q.brokerName), el("td", { class: "num" }, q.queueId),
        el("td", { class: "num" }, q.brokerOffset), el("td", { class: "num" }, q.consumerOffset),
        el("td", { class: "num" }, q.lag), el("td", {}, q.lastTimestamp ? fmtTime(q.lastTimestamp) : "never")))))));
  return [row, detail];
}

function toggleQueues(group) {
  if (state.expanded.has(group)) state.expanded.delete(group); else state.expanded.add(group);
  renderConsumers(state.snapshot.consumers);
}

function brokerAnswerRow(b) {
  return el("tr", { "data-broker": b.brokerName, "data-status": b.status },
    el("td", {}, `${b.clusterName}/${b.brokerName}`),
    el("td", {}, b.address || "none"),
    el("td", {}, el("span", { class: b.status === "ok" ? "yes" : "no" }, b.status), b.remark ? ` (${b.remark})` : ""),
    el("td", { class: "num" }, b.status === "ok" ? `${b.groupsAsked} of ${b.groupsListed}` : "n/a"),
    el("td", { class: "num" }, known(b.putTps)),
    el("td", { class: "num" }, known(b.getTps)));
}

// A small chart of one group's history: lag on top, consume rate below, each scaled to its own peak, over
// the window ending at the last answers. Its text alternative says the same in words.
function consumerChart(g, view, id) {
  const points = g.history || [];
  const W = 250, H = 64, half = H / 2, left = 52;  // the peaks' labels left of the plot
  // A point's time is in seconds before the view's time (0: the last answers).
  const x = (ago) => left + (W - left - 2) * Math.max(0, 1 + ago * 1000 / Math.max(1, view.windowMs));
  const lagPeak = Math.max(0, ...points.map((p) => p[1]));
  const ratePeak = Math.max(0, ...points.map((p) => p[2] || 0));
  const lags = points.map((p) => p[1]);
  const words = points.length
    ? `lag ${lags[0]} to ${lags[lags.length - 1]} (peak ${lagPeak}); consume rate peak ${ratePeak} msg/s; ` +
      `${points.length} sample${points.length === 1 ? "" : "s"}`
    : "no samples yet";
  const title = `Lag and consume rate of ${g.group} over the last ${Math.round(view.windowMs / 60000)} minutes`;
  const svg = document.createElementNS(SVG_NS, "svg");
  for (const [k, v] of Object.entries({ viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
                                        "aria-label": `${title}: ${words}`, "data-points": points.length,
                                        "data-peak-lag": lagPeak, "data-peak-consume": ratePeak, id: `${id}-chart` })) {
    svg.setAttribute(k, String(v));
  }
  const add = (tag, attrs, text) => {
    const n = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
    if (text !== undefined) n.textContent = text;
    svg.append(n);
    return n;
  };
  add("title", {}, `${title}: ${words}`);
  add("line", { x1: left, x2: W, y1: half, y2: half, stroke: "#c9d1d9" });
  add("line", { x1: left, x2: left, y1: 0, y2: H, stroke: "#c9d1d9" });
  const line = (index, peak, top, colour, cls) => {
    const y = (v) => top + (half - 6) * (1 - (v || 0) / Math.max(1, peak)) + 2;
    const coords = points.map((p) => `${x(p[0]).toFixed(1)},${y(p[index]).toFixed(1)}`);
    if (coords.length === 1) coords.unshift(`${(x(points[0][0]) - 3).toFixed(1)},${y(points[0][index]).toFixed(1)}`);
    if (coords.length) add("polyline", { points: coords.join(" "), fill: "none", stroke: colour, "stroke-width": 1.5,
                                         class: cls });
  };
  line(1, lagPeak, 0, "#0b4f9c", "lag");
  line(2, ratePeak, half, "#0b6b2e", "rate");
  add("text", { x: left - 4, y: 11, "text-anchor": "end" }, `lag ${lagPeak}`);
  add("text", { x: left - 4, y: half + 11, "text-anchor": "end" }, `${ratePeak}/s`);
  return [svg, el("span", { class: "sr-only" }, words)];
}

// ------------------------------------------------------------------ timeline
function renderFilter(groups) {
  const select = $("filter");
  const have = new Set([...select.options].map((o) => o.value));
  const names = new Set(groups.map((g) => g.brokerName));
  for (const e of state.events) if (e.brokerName) names.add(e.brokerName);
  for (const name of [...names].sort()) {
    if (!have.has(name)) select.append(el("option", { value: name }, name));
  }
}

function shownEvents() {
  const group = $("filter").value;
  const electionsOnly = $("elections-only").checked;
  return state.events.filter((e) => (!group || e.brokerName === group) &&
                                    (!electionsOnly || e.eventType === "ELECT_MASTER"));
}

function describe(e) {
  switch (e.eventType) {
    case "ELECT_MASTER":
      return e.elected ? `master ${e.masterBrokerId}, epoch ${e.masterEpoch} (${e.electReason || "?"})`
                       : `no master elected (${e.electReason || "no candidate"})`;
    case "ALTER_SYNC_STATE_SET": return `SyncStateSet {${(e.syncStateSet || []).join(", ")}} (epoch ${e.syncStateSetEpoch})`;
    case "APPLY_BROKER_ID": return `broker id ${e.brokerId} for ${e.brokerAddress}`;
    case "UPDATE_BROKER_ADDRESS": return `broker ${e.brokerId} now at ${e.brokerAddress}`;
    case "CLEAN_BROKER_DATA": return e.brokerIds ? `removed ids ${e.brokerIds.join(", ")}` : "removed the group";
    default: return "";
  }
}

function renderTimeline() {
  const events = shownEvents();
  const body = $("events").tBodies[0];
  const before = new Set([...body.rows].map((r) => r.dataset.index));
  body.replaceChildren(...events.slice(-300).reverse().map((e) => el("tr", {
      "data-index": e.index, "data-type": e.eventType, "data-group": e.brokerName,
      class: before.size && !before.has(String(e.index)) ? "events-new" : null },
    el("td", { class: "num" }, e.index),
    el("td", {}, fmtTime(e.timestamp)),
    el("td", {}, e.brokerName),
    el("td", {}, e.eventType === "ELECT_MASTER" ? el("b", {}, "election") : e.eventType.toLowerCase().replaceAll("_", " ")),
    el("td", {}, describe(e)))));
  drawChart(events);
}

function drawChart(events) {
  const holder = $("timeline-chart");
  const elections = events.filter((e) => e.eventType === "ELECT_MASTER");
  if (!elections.length) { holder.replaceChildren(); return; }
  const groups = [...new Set(elections.map((e) => e.brokerName))].sort();
  const t0 = elections[0].timestamp, t1 = Math.max(state.snapshot.at, elections[elections.length - 1].timestamp + 1);
  const W = 1000, left = 140, right = 20, rowH = 34, top = 10;
  const H = top + groups.length * rowH + 24;
  const x = (t) => left + (W - left - right) * (t - t0) / Math.max(1, t1 - t0);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const add = (tag, attrs, text) => {
    const n = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    svg.append(n);
    return n;
  };
  groups.forEach((name, i) => {
    const y = top + i * rowH + rowH / 2;
    add("text", { x: 4, y: y + 4 }, name);
    add("line", { x1: left, x2: W - right, y1: y, y2: y, stroke: "#c9d1d9" });
    const mine = elections.filter((e) => e.brokerName === name);
    mine.forEach((e, j) => {
      const end = j + 1 < mine.length ? mine[j + 1].timestamp : t1;
      if (e.elected) {
        add("rect", { x: x(e.timestamp), y: y - 8, width: Math.max(2, x(end) - x(e.timestamp)), height: 16,
                      fill: ["#0b4f9c", "#0b6b2e", "#7a4a00", "#5b2a86", "#a4000f"][(e.masterBrokerId || 0) % 5],
                      opacity: 0.25 });
        const nearEnd = x(e.timestamp) > W - right - 130;
        add("text", { x: nearEnd ? W - right - 3 : x(e.timestamp) + 3, y: y + 4, "text-anchor": nearEnd ? "end" : "start" },
            `${e.masterBrokerId} e${e.masterEpoch} ${e.electReason || ""}`);
      } else {
        add("text", { x: x(e.timestamp) - 4, y: y + 4, fill: "#a4000f" }, "✖");
      }
    });
  });
  add("text", { x: left, y: H - 6 }, fmtTime(t0));
  add("text", { x: W - right, y: H - 6, "text-anchor": "end" }, fmtTime(t1));
  holder.replaceChildren(svg);
}

// ------------------------------------------------------------------ admin actions
function confirmAction(text, url, body) {
  state.pending = { url, body };
  $("confirm-text").textContent = text;
  $("confirm-answer").textContent = "";
  $("confirm-go").disabled = false;
  $("confirm").showModal();
  $("confirm-close").focus();
}

function askElect(g, r) {
  confirmAction(`Make broker ${r.brokerId} (${r.address}) the master of ${groupKey(g)}? ` +
                `The current master ${g.masterBrokerId ?? "(none)"} steps down; masterEpoch goes up.`,
                "/console/api/electMaster",
                { clusterName: g.clusterName, brokerName: g.brokerName, brokerId: r.brokerId, designateElect: true });
}

function askClean(g) {
  const dead = g.replicas.filter((r) => !r.alive).map((r) => r.brokerId);
  const ids = dead.join(";");
  confirmAction(ids ? `Remove the metadata of the dead replicas ${dead.join(", ")} of ${groupKey(g)}?`
                    : `No replica of ${groupKey(g)} is dead: clean it anyway (only dead brokers are removed)?`,
                "/console/api/cleanBrokerData",
                { clusterName: g.clusterName, brokerName: g.brokerName, brokerControllerIdsToClean: ids || null,
                  isCleanLivingBroker: false });
}

async function send() {
  const { url, body } = state.pending;
  $("confirm-go").disabled = true;
  $("confirm-answer").textContent = "Sending…";
  const headers = { "Content-Type": "application/json" };
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  try {
    const response = await fetch(url, { method: "POST", headers, body: JSON.stringify(body) });
    const answer = await response.json();
    $("confirm-answer").textContent = `Answer: ${answer.codeName || ""} (code ${answer.code})` +
      (answer.remark ? ` — ${answer.remark}` : "");
  } catch (err) {
    $("confirm-answer").textContent = `No answer: ${err}`;
  }
}

function init() {
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.token = $("token").value.trim();
    $("token").value = "";
    if (state.snapshot) render();
  });
  $("forget").addEventListener("click", () => { state.token = ""; if (state.snapshot) render(); });
  $("filter").addEventListener("change", renderTimeline);
  $("elections-only").addEventListener("change", renderTimeline);
  $("confirm-go").addEventListener("click", send);
  connect();
}

document.addEventListener("DOMContentLoaded", init);
