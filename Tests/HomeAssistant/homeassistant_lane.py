#!/usr/bin/env python3
"""Home Assistant itself adopts the Bluetooth proxy of `gattway run` (issue 28, item 1).

Run by Tests/HomeAssistant/run.sh (make test-homeassistant) in the Home Assistant venv, with
DBUS_SYSTEM_BUS_ADDRESS naming a private bus on which the BlueZ simulator plays
Tests/HomeAssistant/scenario.json (a BTHome v2 sensor whose packet id and readings change with
every advertisement, a connectable battery device with a readable 2A19, and a phone advertising
from a resolvable private address that changes every 10 s). Starts a mosquitto, `gattway run` with
bluetooth_proxy (Noise key), a device rule for the BTHome sensor and presence with the phone's IRK
and ESPresense's topics on (room "office"), and Home Assistant Core (`hass --skip-pip`, the
version pinned in requirements.txt) with no Bluetooth adapter of its own (its D-Bus is
unix:path=/nonexistent), so everything it hears over Bluetooth comes through the proxy. Drives
Home Assistant over its HTTP API as a user does in the UI, then checks:
  1. onboarding: the owner account, core config, analytics, integration step; a token; then
     Add integration → MQTT with the lane's broker (the entry loaded), an `mqtt_room` sensor for
     the phone added to configuration.yaml (ESPresense's id `irk:<hex>`), and Home Assistant
     restarted as a user does after editing it;
  2. the ESPHome config flow (Add integration → ESPHome): host and port, then the encryption-key
     step (the proxy refused the plaintext try), then the entry is created with gattway's name;
  3. the entry is loaded, and the bluetooth integration registers the proxy as a connectable
     scanner (websocket bluetooth/subscribe_scanner_details) under the adapter's MAC; the esphome
     diagnostics show the proxy available with gattway's connection slots; the device is
     registered (name, manufacturer gattway) and no esphome or bluetooth repair issue is raised;
  4. a bthome discovery flow for the simulator's sensor appears; confirmed as a user clicks
     Submit, the bthome entry is created with its sensors;
  5. the packet-id sensor (disabled by default) enabled as a user does, the entry reloaded; then
     for 3 different BTHome packet ids Home Assistant's temperature, humidity and battery states
     equal what gattway published on MQTT for the same packet id;
  6. a connection through the proxy: the custom integration gattway_probe (config dir
     custom_components/) connects with bleak_retry_connector and a BleakClient to the battery
     device, which Home Assistant routes through bleak-esphome and aioesphomeapi to gattway, and
     reads 2A19: the simulator's value;
  7. gattway's side: its log says `(Home Assistant <version>, API 1.10) connected`, the client
     stays connected (one connection, no disconnect, over at least 40 s: no 30-s timeout churn);
     bridge/health's bluetooth_proxy section counts the client and the connection made;
  6b. ESPresense: the mqtt_room sensor's state is gattway's room ("office") with a distance
     attribute, from gattway's espresense/devices/irk:<hex>/office messages, which kept one id
     across the phone's address rotations;
  8. Home Assistant's log has no TimeoutAPIError and no "Can't connect to ESPHome API"; its
     warnings and errors about esphome / bluetooth are printed for the reader.
Everything started here (hass, gattway, mosquitto and its subscriber) is stopped on exit, also on
failure; run.sh stops the simulator and its bus. Prints 'N passed, N failed'; exits 1 on a failure.
"""
import asyncio
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import aiohttp

GATTWAY = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
HASS = os.path.join(os.path.dirname(sys.executable), "hass")
KEY = base64.b64encode(bytes(range(32))).decode()
NODE = "gattway-ha"
ADAPTER = "00:AA:02:00:00:00"
BTHOME = "A4:C1:38:00:28:01"
BATTERY = "A4:C1:38:00:28:02"
BATTERY_LEVEL = 73
BASE_TOPIC = "hatest"
DEVICE_TOPIC = f"{BASE_TOPIC}/bthome_probe"
CLIENT_ID_PATH = "/"
# How long the proxy's client must stay connected: aioesphomeapi's keepalive gives up after
# 30 s without an answer, so a connection that churns is seen within this.
STEADY_SECONDS = 40
SENSORS = ("temperature", "humidity", "battery")
# The phone of scenario.json, its ESPresense id and topic, and the mqtt_room sensor that follows it.
PHONE_IRK = "ec0234a357c8ad05341010a60a397d9b"
ROOM = "office"
ESPRESENSE_ID = f"irk:{PHONE_IRK}"
ESPRESENSE_TOPIC = f"espresense/devices/{ESPRESENSE_ID}/{ROOM}"
ROOM_SENSOR = "Lane phone room"

results = []
started = []


def check(name, ok, detail=""):
    ok = bool(ok)
    results.append(ok)
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {str(detail)[:1500]}"), flush=True)
    return ok


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(command, **options):
    """Starts a process that stop_all() ends, in its own process group."""
    process = subprocess.Popen(command, start_new_session=True, **options)
    started.append(process)
    return process


def stop_all():
    """Stops everything started, newest first, each before the next (Home Assistant, then
    gattway while its broker is still there, ...): SIGTERM, SIGKILL after 30 s."""
    for process in reversed(started):
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=30)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def wait_until(predicate, timeout, step=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


async def async_wait_until(predicate, timeout, step=0.5):
    """Awaits predicate() (a coroutine function) until it returns something true."""
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value or time.monotonic() >= deadline:
            return value
        await asyncio.sleep(step)


# MARK: gattway, mosquitto, MQTT


def in_user_namespace():
    """True in run.sh's user namespace (not root outside), where uid 0 maps to another uid."""
    with open("/proc/self/uid_map") as f:
        return f.read().split() != ["0", "0", "4294967295"]


def start_broker(work, port):
    with open(f"{work}/mosquitto.conf", "w") as f:
        f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\n")
        if in_user_namespace():
            # mosquitto started as "root" drops to its own user, which has no uid in here.
            f.write("user root\n")
    start(["mosquitto", "-c", f"{work}/mosquitto.conf"], stderr=subprocess.DEVNULL)
    wait_until(lambda: port_open(port), 10)


def port_open(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def start_gattway(work, mqtt_port, api_port):
    config = {
        "mqtt": {"server": f"mqtt://127.0.0.1:{mqtt_port}", "base_topic": BASE_TOPIC},
        # Home Assistant has MQTT for the mqtt_room sensor: gattway's own MQTT discovery would add
        # a second set of entities for the BTHome sensor beside the proxy's; the lane is about these.
        "homeassistant": {"enabled": False},
        "health": {"interval": "2s"},
        "bluetooth_proxy": {"enabled": True, "listen": f"127.0.0.1:{api_port}", "name": NODE,
                            "encryption_key": KEY, "connection_slots": 2},
        "devices": [{"match": {"address": BTHOME}, "name": "bthome_probe"}],
        "presence": {"room": ROOM, "espresense": {"enabled": True},
                     "identities": [{"name": "lane_phone", "irk": PHONE_IRK}]},
    }
    path = f"{work}/gattway.json"
    with open(path, "w") as f:
        json.dump(config, f)
    os.chmod(path, 0o600)
    log = open(f"{work}/gattway.log", "w")
    start([GATTWAY, "run", "--config", path, "--log-level", "debug"], stdout=log, stderr=log)
    return f"{work}/gattway.log"


def start_mqtt_recorder(work, mqtt_port):
    """mosquitto_sub for the whole run: the BTHome device's state messages, bridge/health and the
    ESPresense messages."""
    out = open(f"{work}/mqtt.txt", "w")
    start(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(mqtt_port), "-v",
           "-t", DEVICE_TOPIC, "-t", f"{BASE_TOPIC}/bridge/health", "-t", "espresense/#"],
          stdout=out, stderr=subprocess.DEVNULL)
    return f"{work}/mqtt.txt"


def mqtt_messages(path, topic):
    messages = []
    for line in text(path).splitlines():
        name, _, payload = line.partition(" ")
        if name == topic:
            try:
                messages.append(json.loads(payload))
            except ValueError:
                pass
    return messages


# MARK: Home Assistant


def write_ha_config(config_dir, http_port):
    os.makedirs(config_dir)
    with open(f"{config_dir}/configuration.yaml", "w") as f:
        f.write(f"""# make test-homeassistant: only what the lane needs (no default_config).
homeassistant:
  name: gattway lane
  latitude: 52.37
  longitude: 4.89
  elevation: 0
  unit_system: metric
  time_zone: UTC
  country: NL
  currency: EUR
http:
  server_host: 127.0.0.1
  server_port: {http_port}
api:
config:
onboarding:
diagnostics:
gattway_probe:
logger:
  default: info
  logs:
    aioesphomeapi: debug
    homeassistant.components.esphome: debug
    homeassistant.components.bluetooth: debug
    habluetooth: debug
    bleak_esphome: debug
""")
    shutil.copytree(f"{HERE}/custom_components", f"{config_dir}/custom_components")


def add_mqtt_room_yaml(config_dir):
    """The mqtt_room sensor a user adds for the phone, as docs/config.md ("ESPresense") shows."""
    with open(f"{config_dir}/configuration.yaml", "a") as f:
        f.write(f"""sensor:
  - platform: mqtt_room
    name: {ROOM_SENSOR}
    device_id: "{ESPRESENSE_ID}"
    state_topic: "espresense/devices/{ESPRESENSE_ID}"
    timeout: 5
    away_timeout: 120
""")


def restart_hass(process, config_dir, log_path):
    """Stops Home Assistant (SIGTERM, as its Restart does) and starts it again on the same config."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return start_hass(config_dir, log_path)


def start_hass(config_dir, log_path):
    # No Bluetooth adapter of its own: the D-Bus address leads nowhere, so BlueZ is not found and
    # the bluetooth integration has only the proxy's remote scanner.
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS="unix:path=/nonexistent")
    out = open(f"{log_path}.stdout", "w")
    return start([HASS, "--config", config_dir, "--skip-pip", "--log-file", log_path],
                 env=env, stdout=out, stderr=subprocess.STDOUT)


class HomeAssistant:
    """Home Assistant's HTTP and websocket APIs, as the frontend uses them."""

    def __init__(self, session, port):
        self.session = session
        self.base = f"http://127.0.0.1:{port}"
        self.token = None
        self.ws = None
        self.ws_id = 0

    @property
    def headers(self):
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    async def request(self, method, path, body=None, form=None):
        async with self.session.request(method, self.base + path, json=body, data=form,
                                        headers=self.headers) as response:
            payload = await response.text()
            try:
                return response.status, json.loads(payload) if payload else None
            except ValueError:
                return response.status, payload

    async def get(self, path):
        return await self.request("GET", path)

    async def post(self, path, body=None, form=None):
        return await self.request("POST", path, body, form)

    async def ready(self):
        try:
            status, _ = await self.get("/api/onboarding")
            return status == 200
        except aiohttp.ClientError:
            return False

    async def api_ready(self):
        """Once onboarded (no /api/onboarding any more): the API answers the token."""
        try:
            status, _ = await self.get("/api/")
            return status == 200
        except aiohttp.ClientError:
            return False

    async def connect_websocket(self):
        self.ws = await self.session.ws_connect(self.base + "/api/websocket")
        await self.ws.receive_json()
        await self.ws.send_json({"type": "auth", "access_token": self.token})
        return (await self.ws.receive_json()).get("type") == "auth_ok"

    async def command(self, message):
        """One websocket command; returns its result message."""
        self.ws_id += 1
        await self.ws.send_json(dict(message, id=self.ws_id))
        while True:
            answer = await self.ws.receive_json(timeout=30)
            if answer.get("id") == self.ws_id and answer.get("type") == "result":
                return answer

    async def subscription_events(self, message, seconds):
        """Subscribes, collects the events for `seconds`, unsubscribes."""
        self.ws_id += 1
        subscription = self.ws_id
        await self.ws.send_json(dict(message, id=subscription))
        events = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                answer = await self.ws.receive_json(timeout=left)
            except asyncio.TimeoutError:
                break
            if answer.get("id") == subscription and answer.get("type") == "event":
                events.append(answer["event"])
        await self.command({"type": "unsubscribe_events", "subscription": subscription})
        return events


async def onboard(ha):
    """The onboarding a new installation asks for: owner, core config, analytics, integrations."""
    client_id = ha.base + CLIENT_ID_PATH
    status, user = await ha.post("/api/onboarding/users", {
        "client_id": client_id, "name": "Lane", "username": "lane", "password": "gattway-lane-28",
        "language": "en"})
    if not check("onboarding: the owner account is created", status == 200 and "auth_code" in (user or {}),
                 (status, user)):
        return False
    status, token = await ha.post("/auth/token", form={
        "grant_type": "authorization_code", "code": user["auth_code"], "client_id": client_id})
    ha.token = (token or {}).get("access_token")
    # The core config step starts the flows of met, radio_browser, google_translate and
    # shopping_list, as for any new installation; their requirements are not installed (nor is
    # ffmpeg), so Home Assistant's log has errors about them that have nothing to do with the proxy.
    steps = [await ha.post("/api/onboarding/core_config"), await ha.post("/api/onboarding/analytics"),
             await ha.post("/api/onboarding/integration", {"client_id": client_id, "redirect_uri": client_id})]
    status, left = await ha.get("/api/onboarding")
    done = isinstance(left, list) and all(step.get("done") for step in left)
    return check("onboarding: token issued, core config, analytics and integration steps done",
                 ha.token and all(s == 200 for s, _ in steps) and done, (token, steps, left))


async def add_esphome(ha, api_port):
    """Settings → Add integration → ESPHome: host and port, then the encryption key."""
    status, flow = await ha.post("/api/config/config_entries/flow",
                                 {"handler": "esphome", "show_advanced_options": False})
    if not check("ESPHome config flow starts with the host form",
                 status == 200 and flow.get("type") == "form" and flow.get("step_id") == "user", (status, flow)):
        return None
    status, flow = await ha.post(f"/api/config/config_entries/flow/{flow['flow_id']}",
                                 {"host": "127.0.0.1", "port": api_port})
    if not check("host and port: the flow asks for the encryption key (gattway refused plaintext)",
                 status == 200 and flow.get("step_id") == "encryption_key", (status, flow)):
        return None
    status, flow = await ha.post(f"/api/config/config_entries/flow/{flow['flow_id']}", {"noise_psk": KEY})
    result = (flow or {}).get("result") or {}
    if not check(f"the encryption key: the entry is created, titled \"{NODE}\"",
                 status == 200 and flow.get("type") == "create_entry" and result.get("title") == NODE,
                 (status, flow)):
        return None
    return result["entry_id"]


async def add_mqtt(ha, mqtt_port):
    """Settings → Add integration → MQTT: the lane's broker on loopback."""
    status, flow = await ha.post("/api/config/config_entries/flow",
                                 {"handler": "mqtt", "show_advanced_options": False})
    if not check("MQTT config flow starts with the broker form",
                 status == 200 and (flow or {}).get("type") == "form"
                 and (flow or {}).get("step_id") == "broker", (status, flow)):
        return False
    status, flow = await ha.post(f"/api/config/config_entries/flow/{flow['flow_id']}",
                                 {"broker": "127.0.0.1", "port": mqtt_port})
    if not check("broker and port: the MQTT entry is created",
                 status == 200 and (flow or {}).get("type") == "create_entry", (status, flow)):
        return False
    return True


async def check_mqtt_room(ha, mqtt_path):
    """The mqtt_room sensor of configuration.yaml shows gattway's room and a distance."""
    check("after the restart the MQTT entry is loaded", await async_wait_until(lambda: _loaded(ha, "mqtt"), 30),
          await entry_state(ha, "mqtt"))

    async def sensor():
        _, states = await ha.get("/api/states")
        found = [s for s in states or [] if s["entity_id"].startswith("sensor.")
                 and (s.get("attributes") or {}).get("friendly_name") == ROOM_SENSOR]
        return found[0] if found else None

    async def in_room():
        state = await sensor()
        return state if state and state.get("state") == ROOM else None

    state = await async_wait_until(in_room, 60, step=1) or await sensor()
    distance = ((state or {}).get("attributes") or {}).get("distance")
    print(f"     mqtt_room sensor: {state}", flush=True)
    check(f"mqtt_room sensor \"{ROOM_SENSOR}\": state is gattway's room \"{ROOM}\", with a distance",
          state and state.get("state") == ROOM and isinstance(distance, (int, float)) and 0 < distance < 20, state)
    messages = mqtt_messages(mqtt_path, ESPRESENSE_TOPIC)
    macs = {m.get("mac") for m in messages}
    others = {line.partition(" ")[0] for line in text(mqtt_path).splitlines()
              if line.startswith("espresense/") and not line.startswith(ESPRESENSE_TOPIC + " ")}
    check(f"gattway published {ESPRESENSE_TOPIC} with that id from at least 2 addresses of the phone, "
          "and no other ESPresense topic",
          messages and all(m.get("id") == ESPRESENSE_ID for m in messages) and len(macs) >= 2 and not others,
          (len(messages), sorted(str(m) for m in macs)[:5], sorted(others)[:5]))


async def entry_state(ha, domain):
    status, entries = await ha.get(f"/api/config/config_entries/entry?domain={domain}")
    return entries if status == 200 and isinstance(entries, list) else []


async def proxy_scanner(ha):
    """The scanners the bluetooth integration has registered, as its panel lists them."""
    events = await ha.subscription_events({"type": "bluetooth/subscribe_scanner_details"}, 1.0)
    return [scanner for event in events for scanner in event.get("add", [])]


async def check_proxy_adopted(ha, entry_id):
    """The ESPHome entry loaded and connected: the proxy's scanner registered. True when it is."""
    entries = await async_wait_until(lambda: _loaded(ha, "esphome"), 30)
    check("the ESPHome entry is loaded", entries, await entry_state(ha, "esphome"))

    async def registered():
        return [s for s in await proxy_scanner(ha) if s.get("source") == ADAPTER]
    scanners = await async_wait_until(registered, 45, step=1)
    scanner = scanners[0] if scanners else {}
    check(f"the bluetooth integration registers the proxy as a connectable scanner ({ADAPTER})",
          scanner.get("connectable") is True and NODE in scanner.get("name", ""), await proxy_scanner(ha))
    status, diagnostics = await ha.get(f"/api/diagnostics/config_entry/{entry_id}")
    bluetooth = ((diagnostics or {}).get("data") or {}).get("bluetooth") or {}
    check("esphome diagnostics: the proxy is available, 2 connection slots",
          status == 200 and bluetooth.get("available") is True and bluetooth.get("connections_limit") == 2,
          (status, bluetooth or ((diagnostics or {}).get("data") or {}).keys()))
    await check_device_and_repairs(ha, entry_id)
    return bool(scanners)


async def check_device_and_repairs(ha, entry_id):
    """The device page Home Assistant shows for the proxy, and Settings → Repairs."""
    answer = await ha.command({"type": "config/device_registry/list"})
    devices = [d for d in answer.get("result") or [] if entry_id in (d.get("config_entries") or [])]
    device = devices[0] if devices else {}
    print(f"     Home Assistant's device: {device.get('name')!r}, manufacturer {device.get('manufacturer')!r}, "
          f"model {device.get('model')!r}, sw_version {device.get('sw_version')!r}", flush=True)
    check(f"the device \"{NODE}\" is registered with gattway as its manufacturer",
          device.get("name") == NODE and device.get("manufacturer") == "gattway", devices)
    answer = await ha.command({"type": "repairs/list_issues"})
    issues = [i for i in answer.get("result", {}).get("issues", [])
              if i.get("domain") in ("esphome", "bluetooth") and not i.get("dismissed_version")]
    check("no esphome or bluetooth repair issue raised", answer.get("success") and not issues, issues)


async def _loaded(ha, domain):
    return [e for e in await entry_state(ha, domain) if e.get("state") == "loaded"]


async def confirm_bthome(ha):
    """The discovered BTHome sensor: the flow in progress, confirmed as a user clicks Submit."""
    async def discovered():
        # What the Discovered section of Settings → Devices & services lists.
        answer = await ha.command({"type": "config_entries/flow/progress"})
        return [f for f in answer.get("result") or [] if f.get("handler") == "bthome"
                and (f.get("context") or {}).get("unique_id") == BTHOME]
    flows = await async_wait_until(discovered, 30, step=1)
    if not check(f"a bthome discovery flow for {BTHOME} is in progress, at bluetooth_confirm",
                 flows and flows[0].get("step_id") == "bluetooth_confirm"
                 and flows[0]["context"].get("source") == "bluetooth", flows):
        return None
    status, flow = await ha.post(f"/api/config/config_entries/flow/{flows[0]['flow_id']}", {})
    result = (flow or {}).get("result") or {}
    if not check("confirmed: the bthome entry is created",
                 status == 200 and flow.get("type") == "create_entry" and result.get("domain") == "bthome",
                 (status, flow)):
        return None
    return result["entry_id"]


async def bthome_entities(ha, entry_id):
    """The entry's entities by the bthome key of their unique id ("<address>-temperature")."""
    answer = await ha.command({"type": "config/entity_registry/list"})
    entities = {}
    for entity in answer.get("result") or []:
        if entity.get("config_entry_id") == entry_id and entity.get("unique_id", "").startswith(BTHOME + "-"):
            entities[entity["unique_id"][len(BTHOME) + 1:]] = entity
    return entities


async def enable_packet_id(ha, entry_id):
    """Settings → Entities → the packet id sensor → Enable; the entry reloaded to create it."""
    entities = await async_wait_until(lambda: _with_sensors(ha, entry_id), 20, step=1)
    check("bthome sensors for temperature, humidity, battery and packet id are registered",
          entities and {*SENSORS, "packet_id"} <= set(entities), list(entities or {}))
    packet = (entities or {}).get("packet_id")
    if not packet:
        return None
    if packet.get("disabled_by"):
        answer = await ha.command({"type": "config/entity_registry/update", "entity_id": packet["entity_id"],
                                   "disabled_by": None})
        status, _ = await ha.post(f"/api/config/config_entries/entry/{entry_id}/reload")
        check("the packet id sensor enabled (disabled by default), the entry reloaded",
              answer.get("success") and status == 200, (answer, status))
    return {key: entities[key]["entity_id"] for key in (*SENSORS, "packet_id") if key in entities}


async def _with_sensors(ha, entry_id):
    entities = await bthome_entities(ha, entry_id)
    return entities if {*SENSORS, "packet_id"} <= set(entities) else None


async def states_of(ha, entity_ids):
    """One GET /api/states: one consistent snapshot (the sensors of one advertisement are written
    in the same event-loop callback)."""
    _, states = await ha.get("/api/states")
    by_id = {s["entity_id"]: s for s in states or []}
    return {key: by_id.get(entity_id) for key, entity_id in entity_ids.items()}


def number(state):
    try:
        return float(state["state"])
    except (TypeError, KeyError, ValueError):
        return None


async def compare_readings(ha, entity_ids, mqtt_path, count=3):
    """For `count` packet ids: Home Assistant's states against gattway's MQTT message of that id."""
    compared = []
    deadline = time.monotonic() + 60
    while len(compared) < count and time.monotonic() < deadline:
        snapshot = await states_of(ha, entity_ids)
        packet = number(snapshot.get("packet_id"))
        if packet is None or packet in [c[0] for c in compared]:
            await asyncio.sleep(0.3)
            continue
        await asyncio.sleep(1)  # gattway's message of that advertisement is on its way
        published = [m for m in mqtt_messages(mqtt_path, DEVICE_TOPIC) if m.get("packet_id") == packet]
        if not published:
            compared.append((packet, snapshot, None))
            continue
        compared.append((packet, snapshot, published[-1]))
    for packet, snapshot, message in compared:
        ha_values = {key: number(snapshot[key]) for key in SENSORS}
        mqtt_values = {key: (message or {}).get(key) for key in SENSORS}
        units = {key: (snapshot[key] or {}).get("attributes", {}).get("unit_of_measurement") for key in SENSORS}
        check(f"packet id {int(packet)}: Home Assistant {ha_values} {units} == gattway on MQTT {mqtt_values}",
              message is not None and all(mqtt_values[k] is not None and ha_values[k] == mqtt_values[k]
                                          for k in SENSORS)
              and units == {"temperature": "°C", "humidity": "%", "battery": "%"},
              message or "no MQTT message with that packet id")
    check(f"{count} different packet ids compared", len(compared) == count, [c[0] for c in compared])


async def read_through_proxy(ha):
    """gattway_probe.read: HA → habluetooth → bleak-esphome → aioesphomeapi → gattway → BlueZ."""
    status, answer = await ha.post("/api/services/gattway_probe/read?return_response",
                                   {"address": BATTERY, "characteristic": "00002a19-0000-1000-8000-00805f9b34fb"})
    response = (answer or {}).get("service_response") or {} if isinstance(answer, dict) else {}
    check(f"a connection through the proxy reads 2A19 of {BATTERY}: {BATTERY_LEVEL}",
          status == 200 and response.get("value") == f"{BATTERY_LEVEL:02x}", (status, answer))
    check("the connection went through bleak-esphome, the device heard by the proxy",
          "bleak_esphome" in (response.get("backend") or "") and response.get("source") == ADAPTER, response)


# MARK: The run


def gattway_side(gattway_log, mqtt_path, connected_at):
    """What a user of gattway notices: the log and bridge/health."""
    log = text(gattway_log)
    hello = re.findall(r"API: (\S+) \(Home Assistant ([0-9.]+), API (\d+\.\d+)\) connected", log)
    print(f"     gattway: Home Assistant clients said hello {len(hello)} time(s): {hello}", flush=True)
    check("gattway's log: (Home Assistant 2025.4.4, API 1.10) connected",
          any(version == "2025.4.4" and api == "1.10" for _, version, api in hello), hello)
    # The config flow's two short connections (plaintext, then with the key) say hello without
    # "Home Assistant" (aioesphomeapi's default client_info); the entry's connection is the one.
    if connected_at:
        left = STEADY_SECONDS - (time.monotonic() - connected_at)
        if left > 0:
            time.sleep(left)
    log = text(gattway_log)
    hello = re.findall(r"API: (\S+) \(Home Assistant [0-9.]+, API \d+\.\d+\) connected", log)
    peers = set(hello)
    # A client's end is "API: <peer> disconnected" (or a warning naming the peer); "API: <peer>:
    # disconnected <address> through the proxy" is a Bluetooth link of that client, not its end.
    gone = [line for line in log.splitlines() for p in peers
            if re.search(rf"API: {re.escape(p)}( disconnected|: .*(closed|timed out|timeout|ping))", line)
            and "through the proxy" not in line]
    check(f"Home Assistant's connection stays up over {STEADY_SECONDS} s: one hello, nothing closed",
          len(hello) == 1 and not gone, (hello, gone[-5:]))
    health = {}
    for message in reversed(mqtt_messages(mqtt_path, f"{BASE_TOPIC}/bridge/health")):
        health = message.get("bluetooth_proxy") or {}
        break
    check("bridge/health: bluetooth_proxy has the client and the connection made through it",
          health.get("clients", 0) >= 1 and health.get("connects", 0) >= 1, health)
    # Adding the proxy, Home Assistant's config flow first tries plaintext, then the all-zero key
    # (to read the name): expected, so counted apart and logged at info — no warning for the user.
    closed = health.get("closed", {})
    check("bridge/health: the config flow's plaintext and all-zero-key probes counted apart, no wrong key",
          closed.get("plaintext_probe", 0) >= 1 and closed.get("zero_key_probe", 0) >= 1
          and closed.get("handshake", 0) == 0 and closed.get("protocol", 0) == 0, closed)
    warnings = [line for line in log.splitlines() if re.match(r"<[0-4]>API: ", line)]
    check("gattway's log: no warning from the ESPHome API while Home Assistant adopts the proxy",
          not warnings, warnings[:5])


def ha_log_findings(ha_log):
    log = text(ha_log)
    for needle in ("TimeoutAPIError", "Can't connect to ESPHome API"):
        check(f"Home Assistant's log has no {needle}", needle not in log,
              [line for line in log.splitlines() if needle in line][:5])
    noteworthy = [line for line in log.splitlines()
                  if re.search(r"\b(WARNING|ERROR)\b", line)
                  and re.search(r"esphome|bluetooth|bleak|habluetooth|bthome|gattway", line, re.I)]
    print(f"     Home Assistant: {len(noteworthy)} warning/error line(s) about esphome/bluetooth:", flush=True)
    for line in noteworthy[:40]:
        print("       " + line[:400], flush=True)


async def drive_home_assistant(http_port, api_port, mqtt_port, mqtt_path, gattway_log, hass):
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        ha = HomeAssistant(session, http_port)
        up = await async_wait_until(ha.ready, 120, step=1)
        if not check("Home Assistant answers on its HTTP port", up):
            return None
        if not await onboard(ha):
            return None
        # MQTT and the mqtt_room sensor first: a YAML sensor platform is set up at start only,
        # and mqtt_room only when an MQTT entry exists then.
        mqtt_added = await add_mqtt(ha, mqtt_port)
        add_mqtt_room_yaml(hass["config"])
        hass["process"] = restart_hass(hass["process"], hass["config"], hass["log"])
        up = await async_wait_until(ha.api_ready, 120, step=1)
        if not check("Home Assistant answers again after its restart", up):
            return None
        check("websocket: authenticated", await ha.connect_websocket())
        entry_id = await add_esphome(ha, api_port)
        if not entry_id:
            return None
        adopted = await check_proxy_adopted(ha, entry_id)
        connected_at = time.monotonic()
        if not check("the proxy connected: the bthome and connection checks can run", adopted,
                     "Home Assistant never finished connecting to the proxy (see its log below)"):
            return None
        bthome_entry = await confirm_bthome(ha)
        if bthome_entry:
            entity_ids = await enable_packet_id(ha, bthome_entry)
            if entity_ids:
                await compare_readings(ha, entity_ids, mqtt_path)
        await read_through_proxy(ha)
        if mqtt_added:
            await check_mqtt_room(ha, mqtt_path)
        return connected_at


def main():
    work = tempfile.mkdtemp(prefix="gattway-homeassistant.")
    mqtt_port, api_port, http_port = free_port(), free_port(), free_port()
    ha_log = f"{work}/home-assistant.log"
    gattway_log = None
    begun = time.monotonic()
    try:
        start_broker(work, mqtt_port)
        mqtt_path = start_mqtt_recorder(work, mqtt_port)
        gattway_log = start_gattway(work, mqtt_port, api_port)
        check("gattway's ESPHome API is up",
              wait_until(lambda: "ESPHome API on" in text(gattway_log), 30), text(gattway_log)[-2000:])
        write_ha_config(f"{work}/config", http_port)
        hass = {"config": f"{work}/config", "log": ha_log, "process": start_hass(f"{work}/config", ha_log)}
        connected_at = asyncio.run(drive_home_assistant(http_port, api_port, mqtt_port, mqtt_path, gattway_log,
                                                        hass))
        gattway_side(gattway_log, mqtt_path, connected_at)
        ha_log_findings(ha_log)
    except SystemExit as stop:  # SIGTERM or SIGINT (the handlers below)
        check("the lane ran to its end", False, f"stopped by a signal (exit status {stop.code})")
    finally:
        stop_all()
        if not all(results):
            print("--- gattway log (end) ---\n" + text(gattway_log)[-4000:] if gattway_log else "")
            print("--- Home Assistant log (esphome, bluetooth, bthome, errors; no debug lines; end) ---")
            lines = [line for line in text(ha_log).splitlines()
                     if re.search(r"esphome|bluetooth|bthome|ERROR", line) and " DEBUG " not in line]
            print("\n".join(line[:400] for line in lines[-60:]))
        if os.environ.get("HA_LANE_KEEP"):
            print(f"(kept {work})")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"lane time {time.monotonic() - begun:.0f} s")
    print(f"{results.count(True)} passed, {results.count(False)} failed")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    main()
