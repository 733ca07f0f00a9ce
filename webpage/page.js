// gattway's web page (docs/web.md, "The page"): plain JavaScript, no library, no build step.
// Everything from devices (names, values, bytes) is untrusted: it only ever goes into the page
// as text (textContent, attributes set one by one), never as HTML.
"use strict";

const state = { devices: [], view: "devices", device: null, csrf: null, timer: null, stream: null };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  return node;
}

async function api(path, options) {
  const response = await fetch(path, Object.assign({ credentials: "same-origin" }, options || {}));
  if (response.status === 401) {
    showLogin();
    throw new Error("unauthorized");
  }
  if (response.status === 404) return null;
  if (!response.ok) throw new Error(path + ": " + response.status);
  return response.json();
}

// MARK: Login

function showLogin() {
  for (const section of document.querySelectorAll("main > section")) section.hidden = true;
  document.getElementById("login").hidden = false;
}

document.getElementById("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const token = document.getElementById("login-token").value;
  const response = await fetch("/login", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: "token=" + encodeURIComponent(token),
  });
  if (!response.ok) {
    document.getElementById("login-error").textContent = "login failed";
    return;
  }
  document.getElementById("login").hidden = true;
  // The login is the page at /login: the page itself is at /.
  if (location.pathname !== "/") location.assign("/" + location.hash);
  else start();
});

// MARK: Formatting

function formatValue(value) {
  if (value === null || value === undefined) return "–";
  if (typeof value === "number") return String(Math.round(value * 1000) / 1000);
  if (typeof value === "boolean") return value ? "on" : "off";
  if (Array.isArray(value)) return value.map(formatValue).join(", ");
  return String(value);
}

function ago(milliseconds) {
  if (milliseconds === null || milliseconds === undefined) return "never";
  const seconds = Math.max(0, Math.round((Date.now() - milliseconds) / 1000));
  if (seconds < 60) return seconds + " s ago";
  if (seconds < 3600) return Math.round(seconds / 60) + " min ago";
  return Math.round(seconds / 3600) + " h ago";
}

function clock(milliseconds) {
  return new Date(milliseconds).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

function rssiText(device) {
  const perAdapter = device.rssi_by_adapter;
  if (perAdapter && Object.keys(perAdapter).length > 1) {
    return Object.entries(perAdapter).map(([adapter, rssi]) => adapter + " " + rssi).join(", ");
  }
  return device.rssi === null || device.rssi === undefined ? "–" : device.rssi + " dBm";
}

function linkText(device) {
  if (device.parked) return "parked";
  if (device.gave_up) return "given up";
  return device.link || "advertises";
}

// MARK: Devices

function readingsCell(device) {
  const cell = el("td", { class: "readings" });
  for (const attribute of device.attributes || []) {
    cell.append(
      el("span", { class: "reading", "data-name": attribute.name },
        attribute.name + " ", el("b", {}, formatValue(attribute.value)),
        attribute.unit ? " " + attribute.unit : ""));
  }
  return cell;
}

function deviceLink(device) {
  return el("a", { href: "#device/" + encodeURIComponent(device.name) }, device.name);
}

function renderDevices() {
  const body = document.querySelector("#devices tbody");
  const rows = state.devices.map((device) => {
    const row = el("tr", { "data-address": device.address },
      el("td", {}, deviceLink(device)),
      el("td", {}, device.model || "–"),
      el("td", {}, device.address),
      readingsCell(device),
      el("td", {}, rssiText(device)),
      el("td", { "data-last-seen": device.last_seen || "" }, ago(device.last_seen)),
      el("td", { class: device.availability || "" }, device.availability || "–"),
      el("td", { class: device.parked ? "parked" : "" }, linkText(device)));
    if (device.owned === false) row.append(el("td", { class: "muted" }, "owned by another gateway"));
    return row;
  });
  body.replaceChildren(...rows);
  document.getElementById("devices-count").textContent = "(" + state.devices.length + ")";
  document.getElementById("devices-empty").hidden = state.devices.length > 0;
}

async function loadDevices() {
  const devices = await api("/api/page/devices");
  state.devices = Array.isArray(devices) ? devices : [];
  if (state.view === "devices") renderDevices();
  if (state.view === "device") renderDeviceFacts();
}

// A reading from the event stream: the device's attributes change in place, no reload.
function reading(data) {
  const device = state.devices.find((candidate) => candidate.name === data.device);
  if (!device || typeof data.payload !== "object" || data.payload === null) {
    scheduleDevices();
    return;
  }
  const attributes = device.attributes || [];
  for (const [name, value] of Object.entries(data.payload)) {
    if (name === "rssi") device.rssi = value;
    else if (name === "last_seen") device.last_seen = Date.parse(value) || device.last_seen;
    else if (name === "linkquality") continue;
    else {
      const attribute = attributes.find((candidate) => candidate.name === name);
      if (attribute) attribute.value = value;
      else attributes.push({ name: name, value: value });
    }
  }
  device.attributes = attributes;
  if (state.view === "devices") {
    renderDevices();
    const row = document.querySelector('#devices tr[data-address="' + CSS.escape(device.address) + '"]');
    if (row) row.classList.add("changed");
  }
  if (state.view === "device" && state.device === device.name) loadHistory();
}

let devicesPending = null;
function scheduleDevices() {
  if (devicesPending) return;
  devicesPending = setTimeout(() => {
    devicesPending = null;
    loadDevices().catch(() => {});
  }, 500);
}

// MARK: One device and its charts

function renderDeviceFacts() {
  const device = state.devices.find((candidate) => candidate.name === state.device);
  const facts = document.getElementById("device-facts");
  if (!device) {
    facts.replaceChildren(el("dt", {}, "device"), el("dd", {}, "not known (removed or forgotten)"));
    return;
  }
  const items = [
    ["address", device.address], ["model", device.model || "–"], ["local name", device.local_name || "–"],
    ["rule", "devices[" + device.rule + "]"], ["RSSI", rssiText(device)], ["last seen", ago(device.last_seen)],
    ["availability", device.availability || "–"], ["link", linkText(device)],
  ];
  for (const attribute of device.attributes || []) {
    items.push([attribute.name, formatValue(attribute.value) + (attribute.unit ? " " + attribute.unit : "")]);
  }
  facts.replaceChildren(...items.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
}

function chart(series) {
  const width = 640, height = 180, left = 48, right = 8, top = 10, bottom = 22;
  const points = series.points || [];
  const box = el("div", { class: "chart", "data-series": series.name });
  box.append(el("h3", {}, series.name + (series.unit ? " (" + series.unit + ")" : "")));
  const image = svg("svg", { viewBox: "0 0 " + width + " " + height, role: "img", "data-points": points.length });
  if (points.length > 0) {
    const times = points.map((point) => point[0]);
    const values = points.map((point) => point[1]);
    let low = Math.min(...values), high = Math.max(...values);
    if (low === high) { low -= 1; high += 1; }
    const first = times[0], last = Math.max(times[times.length - 1], first + 1);
    const x = (time) => left + ((time - first) / (last - first)) * (width - left - right);
    const y = (value) => top + (1 - (value - low) / (high - low)) * (height - top - bottom);
    for (const value of [low, high]) {
      image.append(svg("line", { x1: left, x2: width - right, y1: y(value), y2: y(value) }));
      const label = svg("text", { x: 2, y: y(value) + 3 });
      label.textContent = formatValue(value);
      image.append(label);
    }
    const coordinates = points.map((point) => x(point[0]).toFixed(1) + "," + y(point[1]).toFixed(1));
    image.append(svg("polyline", { points: coordinates.join(" ") }));
    if (points.length <= 120) {
      for (const point of points) image.append(svg("circle", { cx: x(point[0]), cy: y(point[1]), r: 2 }));
    }
    for (const [time, anchor] of [[first, "start"], [last, "end"]]) {
      const label = svg("text", { x: x(time), y: height - 6, "text-anchor": anchor });
      label.textContent = clock(time);
      image.append(label);
    }
  }
  box.append(image);
  return box;
}

async function loadHistory() {
  const name = state.device;
  const history = await api("/api/page/history?device=" + encodeURIComponent(name));
  if (state.view !== "device" || state.device !== name) return;
  const series = history && Array.isArray(history.series) ? history.series : [];
  document.getElementById("charts").replaceChildren(...series.map(chart));
  document.getElementById("charts-empty").hidden = series.length > 0;
}

// Actions: bridge requests (the same code as on MQTT), POSTed with the session's CSRF token.
async function request(verb, body) {
  const result = document.getElementById("action-result");
  const response = await fetch("/api/page/request/" + verb, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": state.csrf || "" },
    body: JSON.stringify(body),
  });
  const answer = response.ok ? await response.json() : null;
  const ok = answer !== null && answer.status === "ok";
  result.className = ok ? "ok" : "failed";
  result.textContent = verb + ": " + (answer === null ? "HTTP " + response.status
    : answer.status + (answer.error ? " (" + answer.error + ")" : ""));
  return ok;
}

document.getElementById("actions").addEventListener("submit", (event) => {
  event.preventDefault();
  const key = document.getElementById("bindkey").value.trim();
  request("device/bindkey", { device: state.device, key: key === "" ? null : key }).catch(() => {});
});
document.getElementById("remove").addEventListener("click", async () => {
  if (!window.confirm("Remove " + state.device + "? It is registered again when it next advertises.")) return;
  if (await request("device/remove", { device: state.device })) {
    await loadDevices().catch(() => {});
    location.hash = "#devices";
  }
});

// Sending to the device: a command its rule declares, a read of its attributes, a GATT read or
// write of a characteristic config.json names for it. The answer is the response the MQTT side
// publishes, which comes after the GATT operation (the POST waits for it).
async function loadActions() {
  const name = state.device;
  const actions = await api("/api/page/actions?device=" + encodeURIComponent(name));
  if (state.view !== "device" || state.device !== name) return;
  const options = [];
  if (actions) {
    for (const command of actions.commands) {
      const range = command.options ? " (" + command.options.join(", ") + ")"
        : command.minimum !== undefined || command.maximum !== undefined
          ? " (" + (command.minimum ?? "") + "…" + (command.maximum ?? "") + ")" : "";
      options.push([JSON.stringify({ kind: "command", command: command.name, encoding: command.encoding }),
        "command " + command.name + ": " + command.encoding + range]);
    }
    for (const attribute of actions.attributes) {
      options.push([JSON.stringify({ kind: "read", attribute: attribute }), "read " + attribute]);
    }
    if (actions.raw_gatt) {
      for (const item of actions.characteristics) {
        const target = { service: item.service, characteristic: item.characteristic };
        const label = (item.service ? item.service + "/" : "") + item.characteristic;
        options.push([JSON.stringify(Object.assign({ kind: "gatt/read" }, target)), "GATT read " + label]);
        options.push([JSON.stringify(Object.assign({ kind: "gatt/write" }, target)), "GATT write " + label + " (hex)"]);
      }
    }
  }
  const select = document.getElementById("send-kind");
  select.replaceChildren(...options.map(([value, label]) => el("option", { value: value }, label)));
  document.getElementById("send").hidden = options.length === 0;
}

function commandValue(text, encoding) {
  // A command's value as JSON when it reads as JSON (42, true, "x"), else as the string typed.
  if (encoding === "string" || encoding === "utf8") return text;
  try {
    return JSON.parse(text);
  } catch (error) {
    return text;
  }
}

document.getElementById("send").addEventListener("submit", async (event) => {
  event.preventDefault();
  const choice = JSON.parse(document.getElementById("send-kind").value);
  const text = document.getElementById("send-value").value.trim();
  const body = { device: state.device };
  if (choice.kind === "command") Object.assign(body, { command: choice.command, value: commandValue(text, choice.encoding) });
  if (choice.kind === "read") body.attribute = choice.attribute;
  if (choice.kind.startsWith("gatt/")) {
    if (choice.service) body.service = choice.service;
    body.characteristic = choice.characteristic;
    if (choice.kind === "gatt/write") body.value = text;
  }
  const result = document.getElementById("send-result");
  result.className = "";
  result.textContent = choice.kind + ": waiting for the device…";
  const response = await fetch("/api/page/send/" + choice.kind, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": state.csrf || "" },
    body: JSON.stringify(body),
  }).catch(() => null);
  const answer = response && response.headers.get("Content-Type") === "application/json" ? await response.json() : null;
  const ok = answer !== null && answer.status === "ok";
  result.className = ok ? "ok" : "failed";
  if (answer === null) {
    result.textContent = choice.kind + ": " + (response ? "HTTP " + response.status
      + (response.status === 504 ? " (no response in time)" : "") : "no answer");
    return;
  }
  const parts = [answer.status];
  if (answer.error) parts.push(answer.error);
  if (answer.att_error) parts.push("ATT error " + answer.att_error);
  if (answer.data !== undefined) parts.push("data " + (typeof answer.data === "string" ? answer.data : JSON.stringify(answer.data)));
  result.textContent = choice.kind + ": " + parts.join("; ");
});

// MARK: The fleet and the proxy (read every 3 s)

async function loadFleet() {
  const fleet = await api("/api/page/fleet");
  document.getElementById("fleet-off").hidden = fleet !== null;
  document.getElementById("fleet-on").hidden = fleet === null;
  if (fleet === null) {
    document.getElementById("fleet-me").textContent = "";
    return;
  }
  document.getElementById("fleet-me").textContent = "(this gateway: " + fleet.gateway_id + ", "
    + fleet.handovers_total + " devices gained so far)";
  document.getElementById("fleet-peers").textContent = fleet.peers.length === 0 ? "No other gateway heard."
    : "Other gateways: " + fleet.peers.map((peer) => peer.gateway + " (heard " + peer.last_message_s + " s ago)").join(", ");
  const rssi = (value) => (value === null ? "–" : value + " dBm");
  document.querySelector("#fleet tbody").replaceChildren(...fleet.devices.map((device) => el("tr", {},
    el("td", {}, device.name || "–"), el("td", { class: "mono" }, device.address), el("td", {}, device.owner || "nobody"),
    el("td", {}, device.role),
    el("td", {}, device.gateways.map((entry) => entry.gateway + ": " + rssi(entry.rssi)
      + (entry.claim === "none" ? "" : " (" + entry.claim + ")")).join(", ")))));
  document.querySelector("#handovers tbody").replaceChildren(...fleet.handovers.map((handover) => el("tr", {},
    el("td", {}, clock(handover.at)), el("td", {}, handover.name || handover.address),
    el("td", {}, handover.gained ? "gained here" : "went to another gateway"), el("td", {}, handover.reason))));
}

async function loadProxy() {
  const proxy = await api("/api/page/proxy");
  document.getElementById("proxy-off").hidden = proxy !== null;
  document.getElementById("proxy-on").hidden = proxy === null;
  if (proxy === null) {
    document.getElementById("proxy-summary").textContent = "";
    return;
  }
  document.getElementById("proxy-summary").textContent = "(" + proxy.clients.length + " client(s), "
    + proxy.slots.free + " of " + proxy.slots.total + " slots free)";
  const facts = [
    ["name", proxy.name], ["listens on", proxy.listen], ["encryption", proxy.encrypted ? "Noise (key set)" : "none"],
    ["scanner", proxy.scanner.mode + " (configured " + proxy.scanner.configured_mode + "), " + proxy.scanner.state],
    ["connection slots", proxy.slots.free + " free of " + proxy.slots.total],
  ];
  document.getElementById("proxy-facts").replaceChildren(
    ...facts.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
  const yes = (flag) => (flag ? "subscribed" : "–");
  document.querySelector("#proxy-clients tbody").replaceChildren(...proxy.clients.map((client) => el("tr", {},
    el("td", { class: "mono" }, client.peer), el("td", {}, client.info || "(handshake)"), el("td", {}, client.api_version || "–"),
    el("td", {}, client.connected_s + " s"), el("td", {}, yes(client.advertisements)), el("td", {}, yes(client.connection_slots)))));
  document.querySelector("#proxy-connections tbody").replaceChildren(...proxy.slots.connections.map((connection) =>
    el("tr", {}, el("td", { class: "mono" }, connection.address), el("td", {}, connection.client || "(gone)"),
      el("td", {}, connection.connected ? "connected" : "connecting"))));
}

// MARK: The radio

function outcomeText(entry) {
  // The outcomes of the radio's view (RadioOutcome in Sources/Gateway/Radio), in words.
  const words = {
    decoded: "decoded", no_values: "a frame without values", repeated_frame: "a repeat of the last frame",
    unknown_format: "unknown format: no parser knows it", key_missing: "encrypted: key missing",
    key_wrong: "encrypted: key wrong", invalid_payload: "a parser rejected the payload",
    no_payload: "no service or manufacturer data", advertisements_off: "the rule ignores advertisements",
    no_rule: "no rule matches", registry_full: "max_devices reached",
    below_rssi_threshold: "below scan.rssi_threshold", filtered_by_scan_services: "filtered by scan.services",
    other_owner: "another gateway of the fleet owns it",
    presence: "a presence identity's resolvable private address",
  };
  const parts = [words[entry.outcome] || entry.outcome.replace(/_/g, " ")];
  if (entry.outcome !== entry.decode && entry.decode) parts.push("parsers: " + (words[entry.decode] || entry.decode));
  if (entry.parser) parts.push("by " + entry.parser);
  if (entry.device) parts.push("device " + entry.device);
  return parts.join("; ");
}

async function loadRadio() {
  const radio = await api("/api/page/radio");
  document.getElementById("radio-off").hidden = radio !== null;
  if (radio === null) return;
  document.getElementById("radio-rate").textContent =
    "(" + radio.reports_per_second + " reports/s, " + radio.addresses + " addresses)";
  const rows = radio.entries.map((entry) => {
    const button = entry.rule ? el("button", { type: "button", class: "rule-button" }, "Rule") : "";
    if (entry.rule) button.addEventListener("click", () => showRule(entry.address));
    const rssi = entry.rssi_by_adapter
      ? Object.entries(entry.rssi_by_adapter).map(([adapter, value]) => adapter + " " + value).join(", ")
      : entry.rssi === undefined ? "–" : entry.rssi + " dBm";
    return el("tr", { "data-address": entry.address, "data-outcome": entry.outcome },
      el("td", {}, entry.address),
      el("td", {}, entry.name || ""),
      el("td", {}, rssi),
      el("td", {}, formatValue(entry.reports_per_second)),
      el("td", {}, ago(Date.parse(entry.last_seen))),
      el("td", { class: "hex" }, entry.data),
      el("td", { class: "outcome outcome-" + entry.outcome }, outcomeText(entry)),
      el("td", {}, button));
  });
  document.querySelector("#radio tbody").replaceChildren(...rows);
}

async function showRule(address) {
  const rule = await api("/api/page/rule?address=" + encodeURIComponent(address));
  document.getElementById("rule").hidden = false;
  document.getElementById("rule-address").textContent = address;
  document.getElementById("rule-json").textContent =
    rule ? JSON.stringify(rule.rule, null, 2) : "no rule would publish it (no parser knows its data)";
  const notes = rule && Array.isArray(rule.notes) ? rule.notes : [];
  document.getElementById("rule-notes").replaceChildren(...notes.map((note) => el("li", {}, note)));
}

document.getElementById("rule-copy").addEventListener("click", () => {
  const text = document.getElementById("rule-json").textContent;
  if (navigator.clipboard) navigator.clipboard.writeText(text).catch(() => {});
});
document.getElementById("rule-close").addEventListener("click", () => {
  document.getElementById("rule").hidden = true;
});

// MARK: Health

function tree(value) {
  if (value === null || typeof value !== "object") return document.createTextNode(formatValue(value));
  if (Array.isArray(value)) {
    if (value.every((item) => item === null || typeof item !== "object")) {
      return document.createTextNode(value.map(formatValue).join(", "));
    }
    return el("ol", {}, ...value.map((item) => el("li", {}, tree(item))));
  }
  return el("dl", { class: "facts" },
    ...Object.entries(value).flatMap(([key, item]) => [el("dt", {}, key), el("dd", {}, tree(item))]));
}

async function loadHealth() {
  const health = await api("/api/health");
  document.getElementById("health").replaceChildren(tree(health));
}

// MARK: The log

async function loadLog() {
  const lines = await api("/api/page/log");
  const rows = (Array.isArray(lines) ? lines : []).map((line) =>
    el("tr", { class: line.level }, el("td", {}, clock(line.time)), el("td", {}, line.level), el("td", {}, line.text)));
  document.querySelector("#log tbody").replaceChildren(...rows);
}

// MARK: The configuration

async function loadConfig() {
  const check = await api("/api/page/config");
  const facts = [];
  const problems = [];
  if (check) {
    facts.push(["running", check.running], ["file", check.path]);
    if (check.file.ok) {
      facts.push(["config check", check.file.same ? "ok, as running" : "ok: " + check.file.summary
        + " (changed since the start: a restart applies it)"]);
    } else {
      facts.push(["config check", check.file.problems.length + " problem(s): a restart would fail"]);
      problems.push(...check.file.problems);
    }
  } else {
    facts.push(["config check", "not available"]);
  }
  document.getElementById("config").replaceChildren(
    ...facts.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
  document.getElementById("config-problems").replaceChildren(...problems.map((problem) => el("li", {}, problem)));
}

// MARK: Views and the event stream

function route() {
  const hash = decodeURIComponent(location.hash.slice(1));
  let view = hash.split("/")[0] || "devices";
  if (!["devices", "device", "radio", "fleet", "proxy", "health", "log", "config"].includes(view)) view = "devices";
  state.view = view;
  state.device = view === "device" ? hash.slice("device/".length) : null;
  for (const section of document.querySelectorAll("main > section")) section.hidden = true;
  document.getElementById("view-" + view).hidden = false;
  for (const link of document.querySelectorAll("nav a")) {
    link.classList.toggle("current", link.id === "nav-" + (view === "device" ? "devices" : view));
  }
  clearInterval(state.timer);
  const refresh = {
    devices: loadDevices, device: loadHistory, radio: loadRadio, fleet: loadFleet, proxy: loadProxy, health: loadHealth,
    log: loadLog, config: loadConfig,
  }[view];
  if (view === "device") {
    document.getElementById("device-name").textContent = state.device;
    document.getElementById("action-result").textContent = "";
    document.getElementById("send-result").textContent = "";
    document.getElementById("send").hidden = true;
    loadActions().catch(() => {});
    renderDeviceFacts();
    loadDevices().catch(() => {});
  }
  refresh().catch(() => {});
  // The event stream carries readings and availability; the rest is read again every few seconds.
  const every = {
    devices: 10000, device: 5000, radio: 2000, fleet: 3000, proxy: 3000, health: 5000, log: 3000, config: 10000,
  }[view];
  state.timer = setInterval(() => refresh().catch(() => {}), every);
}

function connect() {
  if (state.stream) state.stream.close();
  const live = document.getElementById("live");
  const stream = new EventSource("/api/events");
  state.stream = stream;
  stream.addEventListener("open", () => {
    live.textContent = "live";
    live.className = "live on";
  });
  stream.addEventListener("error", () => {
    live.textContent = "reconnecting";
    live.className = "live off";
  });
  stream.addEventListener("reading", (event) => reading(JSON.parse(event.data)));
  stream.addEventListener("availability", () => scheduleDevices());
}

async function start() {
  try {
    const session = await api("/api/session");
    state.csrf = session && session.csrf;
  } catch (error) {
    return;
  }
  window.addEventListener("hashchange", route);
  route();
  connect();
}

start();
