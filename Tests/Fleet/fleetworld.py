"""What the fleet scripts share (fleet-gateways.py, fleet-scale.py): child processes that are
all stopped at the end, the cluster's ports, and a private D-Bus bus per simulated radio."""
import os
import subprocess
import time

PROCESSES = []

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:path=%s</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/>\
<allow own="*"/></policy>
</busconfig>"""


def start(argv, log, **kwargs):
    """A child process writing to `log`, stopped by ``stop_all``."""
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, **kwargs)
    PROCESSES.append(process)
    return process


def stop_all():
    for process in reversed(PROCESSES):
        if process.poll() is None:
            process.terminate()
    for process in PROCESSES:
        try:
            process.wait(timeout=6)
        except subprocess.TimeoutExpired:
            process.kill()


def mqtt_ports(cluster):
    """The MQTT ports of the nodes of a cluster started by cluster.sh (its cluster.env)."""
    values = {}
    for line in open(os.path.join(cluster, "cluster.env")):
        key, _, value = line.strip().partition("=")
        values[key] = value.strip('"')
    return [int(p) for p in values["FLEET_MQTT_PORTS"].split()]


def private_bus(directory):
    """A dbus-daemon on a socket in `directory` (session policy: anyone may own org.bluez);
    returns its address once the socket is there."""
    os.makedirs(directory, exist_ok=True)
    bus = os.path.join(directory, "bus")
    with open(os.path.join(directory, "bus.conf"), "w") as conf:
        conf.write(BUS_CONFIG % bus)
    start(["dbus-daemon", "--config-file=" + os.path.join(directory, "bus.conf"), "--nofork", "--nopidfile"],
          open(os.path.join(directory, "dbus.log"), "w"))
    for _ in range(200):
        if os.path.exists(bus):
            break
        time.sleep(0.05)
    return "unix:path=" + bus
