#!/usr/bin/env python3
"""Show what each Docker fault looks like to a client on the host.

Runs against the cluster of docker-compose.yml (start it with
`docker/cluster.sh up`). For one node (default 1) and each fault it reports:

  * an established connection: what a PING sent during the fault gets
    (reply, EOF, reset, or nothing before the timeout);
  * a new connection during the fault: connect refused / timed out / accepted,
    then what a PING gets;
  * whether a write sent during the fault (SET ... PX) is applied on the node
    once the fault is over;
  * after the fault is undone: the old connection, a new one, how long until
    the node answers PING again, whether data written before the fault is
    still there, and Docker's health status.

Usage: docker/fault-probe.py [--node N] [--timeout S] [FAULT ...]
FAULT is one of: pause disconnect partition restart kill stop (default: all).
Every fault is undone before the next one starts, also on error.
Traffic goes to 127.0.0.1 only.
"""

import argparse
import errno
import socket
import subprocess
import sys
import threading
import time

HOST = "127.0.0.1"
PING = b"PING\r\n"
NETWORK = "quorumlock-net"
HERE = __file__.rsplit("/", 1)[0] if "/" in __file__ else "."
CLUSTER = f"{HERE}/cluster.sh"


def sh(*args, check=True):
    start = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True)
    took = time.monotonic() - start
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {proc.stderr.strip()}")
    return took


def err_name(exc):
    return errno.errorcode.get(exc.errno, str(exc)) if exc.errno else str(exc)


def request(sock, payload, timeout):
    """Send one command and classify what comes back."""
    sock.settimeout(timeout)
    start = time.monotonic()
    try:
        sock.sendall(payload)
    except OSError as exc:
        return f"send failed {err_name(exc)} ({time.monotonic() - start:.3f}s)"
    try:
        data = sock.recv(256)
    except socket.timeout:
        return f"no reply, timed out ({time.monotonic() - start:.3f}s)"
    except OSError as exc:
        return f"{err_name(exc)} ({time.monotonic() - start:.3f}s)"
    took = time.monotonic() - start
    if not data:
        return f"EOF ({took:.3f}s)"
    return f"reply {data.decode(errors='replace').strip()!r} ({took:.3f}s)"


def connect(port, timeout):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    start = time.monotonic()
    try:
        sock.connect((HOST, port))
    except socket.timeout:
        sock.close()
        return None, f"connect timed out ({time.monotonic() - start:.3f}s)"
    except OSError as exc:
        sock.close()
        return None, f"connect {err_name(exc)} ({time.monotonic() - start:.3f}s)"
    return sock, f"connect ok ({time.monotonic() - start:.3f}s)"


def new_connection_ping(port, timeout):
    sock, msg = connect(port, timeout)
    if sock is None:
        return msg
    try:
        return f"{msg}, PING: {request(sock, PING, timeout)}"
    finally:
        sock.close()


def command(port, payload, timeout=2.0):
    sock, msg = connect(port, timeout)
    if sock is None:
        raise RuntimeError(f"node on {port} unreachable: {msg}")
    try:
        return request(sock, payload, timeout)
    finally:
        sock.close()


def health(name):
    proc = subprocess.run(
        ["docker", "inspect", "--format",
         "{{.State.Status}}/{{if .State.Health}}{{.State.Health.Status}}{{end}}", name],
        capture_output=True, text=True)
    return proc.stdout.strip() or "missing"


def wait_pong(port, limit=30.0):
    """Seconds until a new connection gets +PONG."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        sock, _ = connect(port, 0.5)
        if sock is not None:
            try:
                if "PONG" in request(sock, b"PING\r\n", 0.5):
                    return time.monotonic() - start
            finally:
                sock.close()
        time.sleep(0.01)
    raise RuntimeError(f"no PONG from port {port} after {limit}s")


def wait_healthy(name, limit=30.0):
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if health(name) == "running/healthy":
            return time.monotonic() - start
        time.sleep(0.05)
    raise RuntimeError(f"{name} not healthy after {limit}s")


class Fault:
    cycle = False

    def __init__(self, node):
        self.node = node
        self.name = f"quorumlock-redis{node}"
        self.port = 7000 + node


class Pause(Fault):
    label = "docker pause / docker unpause"
    keeps_process = True

    def apply(self):
        return sh("docker", "pause", self.name)

    def undo(self):
        return sh("docker", "unpause", self.name)

    def cleanup(self):
        if health(self.name).startswith("paused"):
            sh("docker", "unpause", self.name, check=False)


class Disconnect(Fault):
    label = f"docker network disconnect / connect {NETWORK}"
    keeps_process = True

    def apply(self):
        return sh("docker", "network", "disconnect", NETWORK, self.name)

    def undo(self):
        return sh("docker", "network", "connect", NETWORK, self.name)

    def cleanup(self):
        sh("docker", "network", "connect", NETWORK, self.name, check=False)


class Partition(Fault):
    label = "cluster.sh partition / heal (iptables DROP on 127.0.0.1:700N)"
    keeps_process = True

    def apply(self):
        return sh(CLUSTER, "partition", str(self.node))

    def undo(self):
        return sh(CLUSTER, "heal", str(self.node))

    def cleanup(self):
        sh(CLUSTER, "heal", str(self.node), check=False)


class Restart(Fault):
    label = "docker restart"
    keeps_process = False
    # The command stops and starts the node before it returns: what a client
    # sees is a timeline, recorded while the command runs.
    cycle = True

    def apply(self):
        return sh("docker", "restart", self.name)

    def undo(self):
        return 0.0

    def cleanup(self):
        sh("docker", "start", self.name, check=False)


class Kill(Fault):
    label = "docker kill / docker start"
    keeps_process = False

    def apply(self):
        return sh("docker", "kill", self.name)

    def undo(self):
        return sh("docker", "start", self.name)

    def cleanup(self):
        sh("docker", "start", self.name, check=False)


class Stop(Fault):
    label = "docker stop / docker start"
    keeps_process = False

    def apply(self):
        return sh("docker", "stop", self.name)

    def undo(self):
        return sh("docker", "start", self.name)

    def cleanup(self):
        sh("docker", "start", self.name, check=False)


FAULTS = {
    "pause": Pause,
    "disconnect": Disconnect,
    "partition": Partition,
    "restart": Restart,
    "kill": Kill,
    "stop": Stop,
}


def timeline(port, action, probe_timeout=0.2):
    """Run action() while polling new connections; return state changes."""
    changes = []
    done = threading.Event()
    start = time.monotonic()

    def poll():
        last = None
        while not done.is_set():
            sock, msg = connect(port, probe_timeout)
            if sock is None:
                state = msg.split(" (")[0]
            else:
                state = "connect ok, PING: " + request(sock, PING, probe_timeout).split(" (")[0]
                sock.close()
            if state != last:
                changes.append((time.monotonic() - start, state))
                last = state
            time.sleep(0.01)

    poller = threading.Thread(target=poll)
    poller.start()
    time.sleep(0.1)
    issued = time.monotonic() - start
    try:
        took = action()
        wait_pong(port)
        time.sleep(0.5)
    finally:
        done.set()
        poller.join()
    return issued, took, changes


def run(fault, timeout):
    out = []
    say = out.append
    port = fault.port
    wait_healthy(fault.name)
    command(port, b"FLUSHALL\r\n")
    command(port, b"SET before:fault 1 PX 60000\r\n")
    old, msg = connect(port, 2.0)
    if old is None:
        raise RuntimeError(msg)
    request(old, b"PING\r\n", 2.0)
    if fault.cycle:
        try:
            issued, took, changes = timeline(port, fault.apply)
            say(f"  command issued at {issued:.3f}s, returned after {took:.3f}s;"
                " new connections (0.2s probes) saw:")
            for at, state in changes:
                say(f"    {at:7.3f}s  {state}")
            say(f"  established connection after the fault: {request(old, PING, 2.0)}")
            say(f"  health: {health(fault.name)}; healthy {wait_healthy(fault.name):.3f}s later")
            before = command(port, b"EXISTS before:fault\r\n")
            say(f"  key written before the fault still there: {before}")
        finally:
            old.close()
            fault.cleanup()
        return out
    try:
        took = fault.apply()
        say(f"  fault command: {took:.3f}s; docker state: {health(fault.name)}")
        # The established connection carries a lock-like write, as a pooled
        # client connection would; a new connection carries a PING.
        on_old = request(old, b"SET during:old 1 PX 30000\r\n", timeout)
        say(f"  established connection, SET during:old PX 30000: {on_old}")
        say(f"  new connection: {new_connection_ping(port, timeout)}")
        took = fault.undo()
        healed = time.monotonic()
        say(f"  undo command: {took:.3f}s")
        if on_old.startswith("no reply"):
            # What the old connection gets now: a late reply to what was
            # sent during the fault, or the end of the connection.
            old.settimeout(15.0)
            try:
                data = old.recv(256)
                late = (f"late reply {data.decode(errors='replace').strip()!r}"
                        if data else "EOF")
            except socket.timeout:
                late = "nothing within 15s"
            except OSError as exc:
                late = err_name(exc)
            say(f"  established connection after undo: {late} "
                f"({time.monotonic() - healed:.3f}s after undo)")
        else:
            say("  established connection after undo: unusable (closed during the fault)")
        pong = wait_pong(port)
        say(f"  new connection answers PING {pong:.3f}s after undo")
        say(f"  health after undo: {health(fault.name)}; healthy "
            f"{wait_healthy(fault.name):.3f}s later")
        before = command(port, b"EXISTS before:fault\r\n")
        during = command(port, b"EXISTS during:old\r\n")
        say(f"  key written before the fault still there: {before}"
            f"; SET sent during the fault applied: {during}")
    finally:
        old.close()
        fault.cleanup()
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node", type=int, default=1, choices=range(1, 6))
    parser.add_argument("--timeout", type=float, default=3.0,
                        help="client-side timeout for each probe (seconds)")
    parser.add_argument("faults", nargs="*", metavar="FAULT",
                        help=f"one of {', '.join(FAULTS)} (default: all)")
    args = parser.parse_args()
    names = args.faults or list(FAULTS)
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        parser.error(f"unknown fault {', '.join(unknown)}; choose from {', '.join(FAULTS)}")
    failed = False
    for name in names:
        fault = FAULTS[name](args.node)
        print(f"{name}: {fault.label} on {fault.name} (127.0.0.1:{fault.port})")
        try:
            for line in run(fault, args.timeout):
                print(line)
        except Exception as exc:  # report and go on with the next fault
            failed = True
            print(f"  ERROR: {exc}")
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
