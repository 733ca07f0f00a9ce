#!/usr/bin/env python3
"""Writes deploy/gattway.order: the functions `gattway run` executes, for the linker.

`make order-file` runs this. It builds gattway as users install it (scripts/release-flags.sh),
starts a private dbus-daemon, the BlueZ simulator's demo world and mosquitto on a free loopback
port, and runs `gattway run` under valgrind's callgrind for PROFILE_SECONDS (default 45): start-up,
connecting and subscribing to the demo's GATT sensors, decoding every advertiser (the demo's BTHome
and Ruuvi sensors and 40 more in the bench's mix — BTHome v2, ATC1441, pvvx, Ruuvi — through a
catch-all rule, some of which go away again), Home Assistant discovery, health, a command round
trip, and idle time; then `gattway config check` of the repository's config.json, for the settings
the profiled config leaves out. Every function callgrind saw running that the gattway binary defines is written out,
one mangled name a line, for lld's --symbol-ordering-file.

Functions that live in an object's single `.text` section (parts of the static Swift runtime are
compiled that way) cannot be moved one by one: the linker places the whole section where its first
listed symbol is. They are listed last, so they do not split the run of movable functions.
Functions the compiler emits without a symbol cannot be named here; deploy/gattway.ld groups them.
Code that no profile saw (the CLI, the simulator, error paths) simply follows; it still works, it is
only not pre-grouped. Regenerate after larger changes; stale names are ignored by the linker.
"""
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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECONDS = float(os.environ.get("PROFILE_SECONDS", "45"))


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    sys.exit(f"profile-order: timed out waiting for {what}")


def config(gattway, port):
    """The demo's gateway configuration (gattway demo --print-config) plus a catch-all rule, so
    every advertiser is decoded, a health message every 5 s, a few common MQTT settings and a
    device limit the advertisers exceed."""
    config = json.loads(run([gattway, "demo", "--print-config", f"mqtt://127.0.0.1:{port}"]))
    config["mqtt"]["client_id"] = "gattway-profile"
    # Settings users commonly give that the demo leaves at their defaults (each is parsed by code
    # of its own).
    config["mqtt"]["qos"] = 0
    config["mqtt"]["protocol"] = "3.1.1"
    # Fewer than the advertisers, so registering a device evicts another (as with rotating
    # random addresses, where the registry stays full).
    config.setdefault("bluetooth", {})["max_devices"] = 30
    config["health"] = {"interval": "5s"}
    config["devices"].append({"match": {}})
    return json.dumps(config, indent=1)


def advertisers(bus, count):
    """Adds `count` advertisement-only sensors in the bench's mix (every simulator template, public
    and random addresses) through the simulator's control interface, then removes a quarter of
    them again (devices that go away)."""
    templates = [
        '"service_data": {"FCD2": {"template": "bthome_v2", "fields": '
        '{"packet_id": {"counter": {"start": 0, "step": 1, "min": 0, "max": 255}}}}}',
        '"service_data": {"181A": {"template": "atc1441"}}',
        '"service_data": {"181A": {"template": "pvvx"}}',
        '"manufacturer_data": {"0x0499": {"template": "ruuvi_rawv2"}}',
    ]
    call = ["busctl", f"--address=unix:path={bus}", "call", "org.bluez", "/io/gattway/Simulator",
            "io.gattway.Simulator1"]
    addresses = []
    for index in range(count):
        address = "%s:7C:8D:00:00:%02X" % ("C4" if index % 2 else "D4", index)
        kind = "public" if index % 2 else "random"
        device = '{"address": "%s", "address_type": "%s", "interval": 0.2, "connectable": false, %s}' % (
            address, kind, templates[index % len(templates)])
        subprocess.run(call + ["AddDevice", "s", device], check=True, capture_output=True)
        addresses.append(address)
    time.sleep(5)
    for address in addresses[: count // 4]:
        subprocess.run(call + ["RemoveDevice", "s", address], check=True, capture_output=True)


def executed_functions(callgrind_out):
    """Function names in callgrind's output, in order of first appearance (fn= and cfn= lines)."""
    names, seen = [], set()
    pattern = re.compile(rb"^c?fn=\(\d+\) (.+)$")
    with open(callgrind_out, "rb") as f:
        for line in f:
            m = pattern.match(line.rstrip(b"\n"))
            if m:
                name = m.group(1).decode("latin-1")
                if name not in seen:
                    seen.add(name)
                    names.append(name)
    return names


def defined_functions(binary):
    out = run(["nm", "--defined-only", binary])
    return {line.split()[-1] for line in out.splitlines() if line.split()[1:2] and line.split()[1] in "tTwW"}


def unmovable_functions(object_files):
    """Functions defined in a section named exactly .text (not one section per function)."""
    names = set()
    for path in object_files:
        out = subprocess.run(["readelf", "-S", "-s", "-W", path], capture_output=True).stdout.decode("latin-1")
        sections = {}
        for line in out.splitlines():
            m = re.match(r"\s*\[\s*(\d+)\]\s+(\S+)", line)
            if m:
                sections[m.group(1)] = m.group(2)
        for line in out.splitlines():
            p = line.split()
            if len(p) >= 8 and p[3] == "FUNC" and sections.get(p[6]) == ".text":
                names.add(p[7])
    return names


def static_library_objects(work):
    """Extracts the static Swift runtime's archives (the ones linked) into `work`."""
    resource = run(["swiftc", "-print-target-info"])
    m = re.search(r'"runtimeResourcePath": "([^"]+)"', resource)
    static = os.path.join(os.path.dirname(m.group(1)), "swift_static", "linux")
    objects = []
    for archive in sorted(os.listdir(static)):
        if not archive.endswith(".a") or "Foundation" in archive or "XCTest" in archive:
            continue
        target = os.path.join(work, archive)
        os.makedirs(target)
        subprocess.run(["ar", "x", os.path.join(static, archive)], cwd=target, check=True)
        objects += [os.path.join(target, o) for o in os.listdir(target) if o.endswith(".o")]
    return objects


def main():
    for tool in ("valgrind", "mosquitto", "dbus-daemon", "mosquitto_pub", "busctl", "readelf", "nm", "ar"):
        if not shutil.which(tool):
            sys.exit(f"profile-order: {tool} is needed "
                     "(apt install valgrind mosquitto mosquitto-clients dbus-daemon binutils)")
    flags = run([os.path.join(REPO, "scripts", "release-flags.sh")]).split()
    subprocess.run(["swift", "build", *flags, "--product", "gattway"], cwd=REPO, check=True)
    bin_dir = run(["swift", "build", *flags, "--show-bin-path"], cwd=REPO).strip()
    gattway = os.path.join(bin_dir, "gattway")

    work = tempfile.mkdtemp(prefix="gattway-profile-")
    children = []
    try:
        bus = os.path.join(work, "bus")
        with open(os.path.join(work, "bus.conf"), "w") as f:
            # A private bus where anyone may own any name (the simulator owns org.bluez).
            f.write(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:path={bus}</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/>\
<allow own="*"/></policy>
</busconfig>
""")
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=f"unix:path={bus}")
        log = lambda name: open(os.path.join(work, name + ".log"), "w")
        children.append(subprocess.Popen(["dbus-daemon", "--nofork", f"--config-file={work}/bus.conf"],
                                         stdout=log("bus"), stderr=subprocess.STDOUT))
        wait_for(lambda: os.path.exists(bus), 10, "dbus-daemon")
        port = free_port()
        with open(os.path.join(work, "mosquitto.conf"), "w") as f:
            f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\n")
        children.append(subprocess.Popen(["mosquitto", "-c", f"{work}/mosquitto.conf"],
                                         stdout=log("mosquitto"), stderr=subprocess.STDOUT))
        children.append(subprocess.Popen([gattway, "simulate", "--scenario", "demo", "--quiet"], env=env,
                                         stdout=log("simulator"), stderr=subprocess.STDOUT))
        with open(os.path.join(work, "config.json"), "w") as f:
            f.write(config(gattway, port))
        out = os.path.join(work, "callgrind.out")
        gateway_log = os.path.join(work, "gattway.log")
        gateway = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={out}", gattway, "run",
             "--config", f"{work}/config.json", "--state-dir", f"{work}/state"],
            env=env, stdout=open(gateway_log, "w"), stderr=subprocess.STDOUT)
        wait_for(lambda: "gateway started" in open(gateway_log).read(), 120, "gattway run under valgrind")
        advertisers(bus, count=40)
        time.sleep(SECONDS / 2)
        for payload in ("ON", "OFF"):
            subprocess.run(["mosquitto_pub", "-p", str(port), "-t", "gattway/desk_lamp/light/set", "-m", payload],
                           check=True)
            time.sleep(2)
        time.sleep(SECONDS / 2)
        gateway.send_signal(signal.SIGINT)
        gateway.wait(timeout=120)

        # The repository's default config.json, checked: parsing settings the profiled config
        # leaves out (every gattway run parses its config, whatever keys it has).
        checked = os.path.join(work, "callgrind-config.out")
        subprocess.run(["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={checked}", gattway,
                        "config", "check", os.path.join(REPO, "config.json")],
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        executed = executed_functions(out)
        executed += [n for n in executed_functions(checked) if n not in set(executed)]
        defined = defined_functions(gattway)
        build_objects = [os.path.join(d, o)
                         for d in (os.path.join(bin_dir, e) for e in os.listdir(bin_dir) if e.endswith(".build"))
                         for o in os.listdir(d) if o.endswith(".o")]
        fixed = unmovable_functions(build_objects + static_library_objects(os.path.join(work, "archives")))
        ours = [n for n in executed if n in defined]
        # Sorted, so that a regenerated file differs only where the code did: for the resident
        # size only which functions are grouped matters, not their order inside the group.
        movable = sorted(n for n in ours if n not in fixed)
        unmovable = sorted(n for n in ours if n in fixed)
        with open(os.path.join(REPO, "deploy", "gattway.order"), "w") as f:
            f.write("\n".join(movable + unmovable) + "\n")
        # The order file is not an input SwiftPM tracks: remove the binary so the next build links again.
        os.remove(gattway)
        print(f"deploy/gattway.order: {len(movable)} movable and {len(unmovable)} unmovable functions "
              f"of {len(executed)} that ran in {SECONDS:.0f} s (gattway run under callgrind)")
    finally:
        for child in reversed(children):
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
