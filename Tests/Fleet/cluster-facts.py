#!/usr/bin/env python3
"""The broker-cluster facts fleet mode relies on, established on a real cluster.

    cluster-facts.py DIR

DIR holds a cluster started by `cluster.sh start DIR` (3 nodes or more). Clients are the real
mosquitto_sub and mosquitto_pub (mosquitto-clients); edge brokers are real mosquitto bridges
started through `cluster.sh edge`. Node 1 is SIGKILLed once and restarted (`cluster.sh kill` and
`restart`); the cluster is whole again at the end. Prints one `PASS|FAIL fleet.cluster.NAME
detail` line per fact, then `fleet.cluster: N passed, N failed`; exits 1 when any fact is not what
docs/fleet.md ("Broker clusters: what the design relies on") says. Every wait is bounded; about
70 s on 2 cores.
"""

import os
import re
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER_SH = os.path.join(HERE, "cluster.sh")

results = []


def report(name, ok, detail):
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} fleet.cluster.{name} {detail}", flush=True)


def load_env(directory):
    env = {}
    with open(os.path.join(directory, "cluster.env")) as f:
        for line in f:
            key, _, value = line.strip().partition("=")
            env[key] = value.strip('"')
    return env


def cluster(*args, timeout=120):
    """Runs cluster.sh with ARGS; returns its output, raises on failure."""
    done = subprocess.run(
        [CLUSTER_SH, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    if done.returncode != 0:
        raise RuntimeError(f"cluster.sh {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


class Sub:
    """A mosquitto_sub whose lines are read as they come: messages (topic, payload, time) and the
    client library's debug lines (CONNACK, SUBACK)."""

    def __init__(self, port, topic, qos=1, client_id=None, clean=True, keepalive=60, will=None):
        args = ["stdbuf", "-oL", "mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-t", topic]
        args += ["-q", str(qos), "-k", str(keepalive), "-d", "-F", "=MSG %t %p"]
        if client_id:
            args += ["-i", client_id]
        if not clean:
            args += ["-c"]
        if will:
            args += ["--will-topic", will[0], "--will-payload", will[1], "--will-qos", "1"]
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True
        )
        self.lines = []
        self.lock = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.lock:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self.lock.notify_all()

    def messages(self):
        with self.lock:
            return [(t, *line[5:].split(" ", 1)) for t, line in self.lines if line.startswith("=MSG ")]

    def payloads(self):
        return [m[2] if len(m) > 2 else "" for m in self.messages()]

    def count(self, needle):
        with self.lock:
            return sum(1 for _, line in self.lines if needle in line)

    def wait(self, predicate, timeout):
        deadline = time.monotonic() + timeout
        with self.lock:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(min(left, 0.2))
            return True

    def wait_suback(self, timeout=10):
        """True once the broker acknowledged the subscription (then its binding exists cluster-wide)."""
        return self.wait(lambda: any("received SUBACK" in line for _, line in self.lines), timeout)

    def wait_messages(self, n, timeout):
        return self.wait(lambda: sum(1 for _, line in self.lines if line.startswith("=MSG ")) >= n, timeout)

    def signal(self, sig):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def stop(self):
        self.signal(signal.SIGKILL)
        self.proc.wait(timeout=10)


def pub(port, topic, payloads, qos=1, retain=False, client_id=None):
    """Publishes each payload (one connection, one message per line) and waits for the PUBACKs."""
    args = ["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-t", topic, "-q", str(qos), "-l"]
    if retain:
        args += ["-r"]
    if client_id:
        args += ["-i", client_id]
    try:
        return subprocess.run(
            args, input="".join(p + "\n" for p in payloads), capture_output=True, text=True, timeout=10
        ).returncode
    except subprocess.TimeoutExpired:
        return None


def pub_empty_retained(port, topic):
    subprocess.run(
        ["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-t", topic, "-q", "1", "-r", "-n"],
        capture_output=True,
        timeout=15,
    )


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    directory = os.path.abspath(sys.argv[1])
    env = load_env(directory)
    mqtt = [int(p) for p in env["FLEET_MQTT_PORTS"].split()]
    if len(mqtt) < 3:
        sys.exit("cluster-facts.py needs a cluster of 3 nodes or more")
    n1, n2, n3 = mqtt[:3]
    queue_type = env.get("FLEET_MQTT_DURABLE_QUEUE_TYPE", "classic")
    quorum = queue_type == "quorum"
    base = int(env["FLEET_PORT_BASE"])
    edge_a, edge_b, edge_tp, edge_c = base - 9, base - 8, base - 7, base - 6  # 18821.. by default
    run = f"{os.getpid()}-{int(time.time()) % 100000}"
    root = f"fleet/facts/{run}"
    cid = f"facts-{run}"
    started = time.monotonic()
    subs = []
    edges = []

    def sub(*args, **kwargs):
        s = Sub(*args, **kwargs)
        subs.append(s)
        return s

    try:
        # (a) QoS 1 across nodes.
        topic = f"{root}/a"
        s = sub(n3, topic)
        s.wait_suback()
        t0 = time.monotonic()
        pub(n1, topic, [f"m{i}" for i in range(1, 6)])
        s.wait_messages(5, 5)
        time.sleep(0.3)
        got = s.payloads()
        latency = (s.messages()[0][0] - t0) if got else None
        report(
            "qos1_across_nodes",
            got == [f"m{i}" for i in range(1, 6)],
            f"5 QoS 1 messages published on node 1, received on node 3: {got}"
            + (f", first after {latency * 1000:.0f} ms (including mosquitto_pub's connect)" if got else ""),
        )
        s.stop()

        # A client id is unique in the whole cluster: connecting it on node 2 closes its connection
        # on node 1 (mosquitto_sub then connects again, and the two take turns).
        first = sub(n1, f"{root}/id", qos=0, client_id=f"{cid}-same")
        first.wait_suback()
        t0 = time.monotonic()
        second = sub(n2, f"{root}/id", qos=0, client_id=f"{cid}-same")
        second.wait_suback()
        kicked = first.wait(lambda: first.count("sending CONNECT") >= 2, 5)
        dt = time.monotonic() - t0
        second.stop()
        first.stop()
        report(
            "client_id_cluster_wide",
            kicked,
            "the same client id connected on node 2 closes its session on node 1: "
            + (f"first client reconnecting after {dt:.2f} s" if kicked else "both stayed connected for 5 s"),
        )

        # (b) Retained messages: kept by the node that received them, delivered to exact-topic
        # subscriptions only.
        topic = f"{root}/b/retained"
        pub(n1, topic, ["kept"], retain=True)
        seen = {}
        for label, port, filt in (
            ("node 1 exact", n1, topic),
            ("node 2 exact", n2, topic),
            ("node 3 exact", n3, topic),
            ("node 1 wildcard #", n1, f"{root}/b/#"),
            ("node 1 wildcard +", n1, f"{root}/b/+"),
        ):
            s = sub(port, filt)
            s.wait_suback()
            seen[label] = s.wait_messages(1, 1.5)
            s.stop()
        pub_empty_retained(n1, topic)
        detail = ", ".join(f"{k}: {'seen' if v else 'not seen'}" for k, v in seen.items())
        report("retained_same_node", seen["node 1 exact"], f"retained via node 1 -> {detail}")
        report(
            "retained_not_replicated",
            not seen["node 2 exact"] and not seen["node 3 exact"],
            "a retained message is kept only by the node it was published on (expected: not seen on nodes 2, 3)",
        )
        report(
            "retained_exact_topic_only",
            not seen["node 1 wildcard #"] and not seen["node 1 wildcard +"],
            "a wildcard subscription gets no retained message, even on the same node (expected: not seen)",
        )

        # (c) Last Will when the client's process dies (the kernel closes its socket) and when the
        # client hangs (socket open, no packets: keepalive expiry).
        will_topic = f"{root}/c/will"
        ws = sub(n3, f"{root}/c/#")
        ws.wait_suback()
        victim = sub(n1, f"{root}/c/none", client_id=f"{cid}-c1", will=(will_topic, "gone-c1"))
        victim.wait_suback()
        t0 = time.monotonic()
        victim.signal(signal.SIGKILL)
        ok = ws.wait_messages(1, 5)
        dt = ws.messages()[0][0] - t0 if ok else None
        report(
            "lwt_client_killed",
            ok and dt < 2,
            "kill -9 of a client on node 1: its will reached node 3 after "
            + (f"{dt * 1000:.0f} ms" if ok else "nothing in 5 s"),
        )
        keepalive = 5  # mosquitto's clients refuse less
        hung = sub(n1, f"{root}/c/none", client_id=f"{cid}-c2", keepalive=keepalive, will=(will_topic, "gone-c2"))
        hung.wait_suback()
        time.sleep(0.2)
        t0 = time.monotonic()
        hung.signal(signal.SIGSTOP)
        ok = ws.wait(lambda: "gone-c2" in ws.payloads(), 4 * keepalive)
        dt = [t for t, _, p in ws.messages() if p == "gone-c2"][0] - t0 if ok else None
        hung.signal(signal.SIGCONT)
        report(
            "lwt_client_hung",
            ok and keepalive <= dt <= 3 * keepalive + 1.5,
            f"client on node 1 stopped (SIGSTOP), keepalive {keepalive} s: will on node 3 after "
            + (f"{dt:.1f} s ({dt / keepalive:.1f} x keepalive; expected 1..3 x: 2..3 x after the client's last packet)"
               if ok else f"nothing in {4 * keepalive} s"),
        )
        ws.stop()
        hung.stop()

        # (e) A persistent session (clean session false, QoS 1) moving from node 1 to node 2.
        topic = f"{root}/e/session"
        sid = f"{cid}-session"
        s = sub(n1, topic, client_id=sid, clean=False)
        s.wait_suback()
        s.stop()
        pub(n3, topic, ["e1", "e2", "e3"])
        s = sub(n2, topic, client_id=sid, clean=False)
        s.wait_messages(3, 5)
        time.sleep(0.3)
        got = s.payloads()
        s.stop()
        report(
            "session_moves_node",
            got == ["e1", "e2", "e3"],
            f"session made on node 1, 3 messages queued while away, resumed on node 2: got {got}",
        )
        pub(n3, topic, ["e4", "e5"])  # queued again on node 1 (the queue's home) for the kill below

        # (f) Mosquitto edges bridged to the cluster: A prefers node 1, B node 2.
        ups_a = [str(p) for p in (n1, n2, n3)]
        ups_b = [str(p) for p in (n2, n3, n1)]
        t0 = time.monotonic()
        edges.append("A")
        cluster("edge", directory, "A", str(edge_a), *ups_a)
        edges.append("B")
        cluster("edge", directory, "B", str(edge_b), *ups_b)
        edges_up = time.monotonic() - t0
        topic = f"{root}/f/x"
        sa, sb, s3 = sub(edge_a, f"{root}/f/#"), sub(edge_b, f"{root}/f/#"), sub(n3, f"{root}/f/#")
        for s in (sa, sb, s3):
            s.wait_suback()
        pub(edge_a, topic, [f"fa{i}" for i in range(5)])
        pub(edge_b, topic, [f"fb{i}" for i in range(5)])
        pub(n3, topic, [f"f3{i}" for i in range(5)])
        for s in (sa, sb, s3):
            s.wait_messages(15, 5)
        time.sleep(1.5)  # a loop would keep going: give it time to show
        counts = {}
        for label, s in (("edge A", sa), ("edge B", sb), ("node 3", s3)):
            p = s.payloads()
            counts[label] = {src: [p.count(f"{src}{i}") for i in range(5)] for src in ("fa", "fb", "f3")}
        once = lambda c: all(x == 1 for x in c)
        twice = lambda c: all(x == 2 for x in c)
        report(
            "bridge_exactly_once_elsewhere",
            once(counts["edge B"]["fa"]) and once(counts["node 3"]["fa"]) and once(counts["edge A"]["fb"])
            and once(counts["node 3"]["fb"]) and once(counts["edge A"]["f3"]) and once(counts["edge B"]["f3"]),
            f"(edges up in {edges_up:.1f} s) copies of each of 5 messages: published at edge A -> edge B "
            f"{counts['edge B']['fa']}, node 3 {counts['node 3']['fa']}; at edge B -> edge A {counts['edge A']['fb']}, "
            f"node 3 {counts['node 3']['fb']}; at node 3 -> edge A {counts['edge A']['f3']}, "
            f"edge B {counts['edge B']['f3']}",
        )
        report(
            "bridge_echo_to_origin",
            twice(counts["edge A"]["fa"]) and twice(counts["edge B"]["fb"]),
            f"a subscriber on the edge a message was published at gets it twice (the cluster sends it back; "
            f"MQTT 3.1.1 has no no-local; no further loop): edge A {counts['edge A']['fa']}, "
            f"edge B {counts['edge B']['fb']}",
        )
        for s in (sa, sb, s3):
            s.stop()

        # mosquitto's try_private (bridge flag in the protocol version byte) is refused by RabbitMQ.
        os.environ["FLEET_EDGE_TRY_PRIVATE"] = "true"
        os.environ["FLEET_EDGE_WAIT"] = "0"
        edges.append("tp")
        try:
            cluster("edge", directory, "tp", str(edge_tp), str(n2))
        finally:
            del os.environ["FLEET_EDGE_TRY_PRIVATE"], os.environ["FLEET_EDGE_WAIT"]
        stp = sub(edge_tp, f"{root}/tp")
        stp.wait_suback()
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not stp.payloads():
            pub(n2, f"{root}/tp", ["through"])
            time.sleep(0.5)
        report(
            "bridge_try_private_refused",
            not stp.payloads(),
            "a bridge with try_private true never connects to RabbitMQ (framing error): "
            + ("nothing passed in 3 s" if not stp.payloads() else f"messages passed: {stp.payloads()}"),
        )
        stp.stop()

        # Edge C bridges inbound at QoS 1 (`topic # both 1`): its QoS 1 queue on the cluster is
        # durable and lives on the node the bridge is connected to (node 1).
        edges.append("C")
        os.environ["FLEET_EDGE_TOPICS"] = "# both 1"
        try:
            cluster("edge", directory, "C", str(edge_c), *ups_a)
        finally:
            del os.environ["FLEET_EDGE_TOPICS"]
        fc_in = sub(edge_c, f"{root}/f/downC")
        fc_in.wait_suback()

        # Node 1 dies with: a 'gateway' client on it (clean session, will, QoS 1 subscription),
        # the queue of the persistent session above, and edge A's bridge.
        gw_id = f"{cid}-gw"
        gw_will = f"{root}/d/will"
        gw_topic = f"{root}/d/cmd"
        ws = sub(n3, gw_will)
        gw = sub(n1, gw_topic, client_id=gw_id, keepalive=5, will=(gw_will, "gw-gone"))
        for s in (ws, gw):
            s.wait_suback()
        probe = sub(n3, f"{root}/f/probe")
        probe.wait_suback()
        fa_in = sub(edge_a, f"{root}/f/down")
        fa_in.wait_suback()
        cluster("kill", directory, "1")
        t_kill = time.monotonic()
        gw.stop()  # its connection died with the node; the process would only retry node 1

        # Probes published at edge A every 0.25 s from the kill on, while the facts below run.
        probes = {"sent": 0, "stop": False}

        def send_probes():
            while not probes["stop"] and time.monotonic() < t_kill + 20:
                pub(edge_a, f"{root}/f/probe", [f"p{probes['sent']}"])
                pub(n3, f"{root}/f/down", [f"d{probes['sent']}"])
                pub(n3, f"{root}/f/downC", [f"c{probes['sent']}"])
                probes["sent"] += 1
                if probe.payloads() and fa_in.payloads() and time.monotonic() > probe.messages()[0][0] + 1:
                    break
                time.sleep(0.25)

        prober = threading.Thread(target=send_probes, daemon=True)
        prober.start()

        # A client moving to another node with the same client id.
        moved = {}
        for qos in (0, 1):
            t0 = time.monotonic()
            s = sub(n2, gw_topic, qos=qos, client_id=gw_id, keepalive=5)
            ok = s.wait_suback(4)
            moved[qos] = (ok, time.monotonic() - t0, s.count("sending CONNECT"))
            s.stop()
        report(
            "reconnect_qos0_same_id",
            moved[0][0],
            "after node 1 died, the gateway's client id reconnects to node 2 with a QoS 0 subscription: "
            + (f"SUBACK after {moved[0][1]:.2f} s" if moved[0][0] else "no SUBACK in 4 s"),
        )
        report(
            "reconnect_qos1_same_id_blocked",
            not moved[1][0],
            "the same client id with a QoS 1 subscription (clean session!) is refused while node 1 is down: "
            + (f"SUBACK after {moved[1][1]:.2f} s" if moved[1][0] else
               f"CONNACK then the connection closed at SUBSCRIBE, {moved[1][2]} tries in 4 s "
               "(its QoS 1 queue is durable, homed on the dead node: NOT_FOUND)"),
        )
        fresh = sub(n2, gw_topic, qos=1, client_id=f"{gw_id}-2")
        ok = fresh.wait_suback(4)
        fresh.stop()
        report(
            "reconnect_qos1_new_id",
            ok,
            "a new client id subscribes at QoS 1 on node 2 while node 1 is down: "
            + ("SUBACK" if ok else "no SUBACK in 4 s"),
        )

        # (e) The persistent session whose queue lived on node 1: a classic queue is reachable only
        # through its home node; a quorum queue (mqtt.durable_queue_type = quorum) has replicas.
        e6_rc = pub(n3, f"{root}/e/session", ["e6"])  # published while node 1 is down
        s = sub(n2, f"{root}/e/session", client_id=sid, clean=False)
        ok = s.wait_suback(3) and s.wait_messages(3, 3)
        got_down = s.payloads()
        s.stop()
        if quorum:
            expected, why = ["e4", "e5", "e6"], "quorum queue: a replica on node 2 or 3 takes over"
        else:
            expected, why = [], "classic queue: NOT_FOUND, its home node is down"
        report(
            "session_home_node_down",
            got_down == expected and ok == quorum,
            f"the persistent session (queue made on node 1, {queue_type}) resumed on node 2 after node 1 died: "
            + (f"subscribed, got {got_down}" if ok else "refused at SUBSCRIBE, nothing delivered")
            + f" (expected: {why})",
        )

        # (f) Edge A's bridge (inbound QoS 0) moves to another node.
        prober.join(25)
        probes["stop"] = True
        seq = probes["sent"]
        first = probe.messages()[0][0] - t_kill if probe.payloads() else None
        probe.wait_messages(seq, 3)
        p = probe.payloads()
        dup = len(p) - len(set(p))
        lost = [f"p{i}" for i in range(seq) if f"p{i}" not in p]
        back = fa_in.messages()[0][0] - t_kill if fa_in.payloads() else None
        missed_in = seq - len(set(fa_in.payloads()))
        with open(os.path.join(directory, "edge-A", "mosquitto.log")) as f:
            attempts = re.findall(r"Connecting bridge \(step 1\) fleet-A \(([0-9.:]+)\)", f.read())
        report(
            "bridge_failover",
            first is not None and back is not None and not dup and not lost,
            "edge A's bridge on node 1 after the kill: edge -> cluster again (first probe) after "
            + (f"{first:.1f} s" if first is not None else "never (20 s)")
            + ", cluster -> edge after " + (f"{back:.1f} s" if back is not None else "never")
            + f" ({missed_in} of {seq} published on node 3 meanwhile never reached edge A: QoS 0 inbound, not queued)"
            + f"; edge A -> cluster probes every 0.25 s from the kill on: {len(lost)} of {seq} lost, {dup} duplicated; "
            f"bridge tried {attempts[-3:]}",
        )
        probe.stop()
        fa_in.stop()
        probe.stop()
        fa_in.stop()

        # (d) The will of the client whose node died, watched until 3 keepalives + 2 s after the kill.
        ws.wait(lambda: bool(ws.payloads()), max(0, t_kill + 3 * 5 + 2 - time.monotonic()))
        d_seen = ws.payloads()
        waited = time.monotonic() - t_kill
        report(
            "lwt_node_killed",
            not d_seen,
            "client on node 1 with a will, node 1 SIGKILLed: will on node 3 "
            + (f"after {ws.messages()[0][0] - t_kill:.1f} s" if d_seen
               else f"never (watched {waited:.0f} s, keepalive 5 s)"),
        )

        pub(n3, f"{root}/f/downC", ["late"])
        fc_in.wait_messages(1, 1)
        with open(os.path.join(directory, "edge-C", "mosquitto.log")) as f:
            tries_c = len(re.findall(r"Connecting bridge \(step 1\)", f.read())) - 1  # less the first, before the kill
        report(
            "bridge_qos1_in_no_failover",
            not fc_in.payloads(),
            f"edge C (topic # both 1) on node 1 after the kill: {len(fc_in.payloads())} of {seq + 1} messages "
            f"published on node 3 reached it in {time.monotonic() - t_kill:.0f} s; {tries_c} connection attempts "
            "since the kill (each refused at SUBSCRIBE: its durable QoS 1 queue's home node is down)",
        )

        t0 = time.monotonic()
        cluster("restart", directory, "1")
        restart = time.monotonic() - t0
        s = sub(n2, f"{root}/e/session", client_id=sid, clean=False)
        s.wait_messages(2, 5)
        time.sleep(0.3)
        got = s.payloads()
        s.stop()
        recovered = None
        t0 = time.monotonic()
        while time.monotonic() < t0 + 15:
            pub(n3, f"{root}/f/downC", ["after"])
            if fc_in.wait(lambda: "after" in fc_in.payloads(), 0.5):
                recovered = time.monotonic() - t0
                break
        report(
            "bridge_qos1_in_after_restart",
            recovered is not None,
            "edge C passes messages again once node 1 is back: "
            + (f"after {recovered:.1f} s more" if recovered is not None else "not within 15 s"),
        )
        fc_in.stop()
        ws.wait(lambda: bool(ws.payloads()), 1)
        expected = [] if quorum else ["e4", "e5"]
        report(
            "session_after_restart",
            got == expected,
            f"node 1 back after {restart:.1f} s: the persistent session resumes on node 2 with {got} "
            + ("(all delivered already while node 1 was down)" if quorum else
               "(e4, e5 queued before the kill were kept on node 1's disk; e6, published while it was down "
               f"(mosquitto_pub exit {e6_rc}), is lost)"),
        )
        report(
            "lwt_node_killed_after_restart",
            not ws.payloads(),
            "the will of the client on the killed node is not published when the node comes back either: "
            + (f"got {ws.payloads()}" if ws.payloads() else "nothing"),
        )
        ws.stop()
    except Exception as error:  # a harness step failed: that is a failed run, not a fact
        report("harness", False, f"{type(error).__name__}: {error}")
    finally:
        for s in subs:
            if s.proc.poll() is None:
                s.stop()
        for name in edges:
            try:
                cluster("edge-stop", directory, name)
            except Exception as error:
                print(f"could not stop edge {name}: {error}", file=sys.stderr)
    passed = sum(results)
    failed = len(results) - passed
    print(f"fleet.cluster facts took {time.monotonic() - started:.0f} s")
    print(f"fleet.cluster: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
