#!/usr/bin/env python3
"""A loopback TCP proxy that can freeze its connections, as a NAT gateway or a load balancer that drops its
connection state does: on command, every connection established so far stops passing bytes in either
direction, and nothing tells either end (no FIN, no RST; both sockets simply stay open, unread and unwritten),
while connections opened afterwards pass normally. What it tests: a client that only notices a dead peer when
the peer closes hangs on such a connection until its own timeouts (if any) fire.

  freeze_proxy.py --upstream 127.0.0.1:PORT --port-file FILE [--stats-file FILE] [--control-fifo FILE]
                  [--max-seconds N] [--log-requests]

It listens on 127.0.0.1, port 0 (the kernel picks one), and writes the port to --port-file once it accepts
connections (written to a temporary name, then renamed: a reader never sees a partial file). Commands:
- SIGUSR1, or the line `freeze` written to --control-fifo: freeze every connection open now;
- SIGTERM, SIGINT, or `quit` on the FIFO: close everything and exit 0;
- it exits by itself after --max-seconds (default 300), so a test that forgets it leaves nothing behind.
--stats-file (JSON, rewritten atomically whenever a count changes, at most every 0.1 s, and at once after each
freeze) holds: accepted, open (passing), frozen (frozen and still held open), freezes (commands obeyed),
last_froze (connections the last freeze caught), bytes_up / bytes_down (forwarded client->upstream and
upstream->client), dropped_bytes (read before a freeze but never forwarded), unread_bytes (waiting unread in
the kernel on frozen sockets when the file was written: what the ends kept sending into the freeze),
upstream_failures, seconds (since the start). On stderr it logs each connection opened and closed and each
freeze, with the time since the start, and with --log-requests the request line of each HTTP request a client
sends (a request line at the start of a read; a sketch for reading a test's log, not an HTTP parser). A test sends SIGUSR1 (or writes `freeze`), then waits until
`freezes` counts it; SIGUSR1 cannot block, while opening the FIFO to write blocks if the proxy is gone.

Python 3 standard library only; one thread, one selector. Loopback addresses only."""

import argparse
import fcntl
import ipaddress
import json
import os
import selectors
import signal
import socket
import struct
import sys
import termios
import time

CHUNK = 65536
# Past this many bytes waiting to be written to one side, the other side is not read until they drain.
HIGH_WATER = 4 * CHUNK


def loopback_addr(spec):
    host, sep, port = spec.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError("want HOST:PORT, got %r" % spec)
    host = host.strip("[]")
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise argparse.ArgumentTypeError("%s: %s" % (spec, e))
    for family, _, _, _, addr in infos:
        if ipaddress.ip_address(addr[0]).is_loopback:
            return family, addr
    raise argparse.ArgumentTypeError("%s is not a loopback address" % spec)


def write_atomic(path, text):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class Side:
    """One socket of a connection and the bytes waiting to be written to it."""

    def __init__(self, sock):
        self.sock = sock
        self.out = bytearray()
        self.read_done = False  # EOF read from this socket
        self.write_done = False  # shut down for writing (EOF passed on to it)


class Conn:
    def __init__(self, n, client, upstream):
        self.n = n
        self.client = Side(client)
        self.upstream = Side(upstream)
        self.frozen = False

    def peer(self, side):
        return self.upstream if side is self.client else self.client


class Proxy:
    def __init__(self, args):
        self.args = args
        self.sel = selectors.DefaultSelector()
        self.conns = set()
        self.frozen = []
        self.stats = {"accepted": 0, "open": 0, "frozen": 0, "freezes": 0, "last_froze": 0, "bytes_up": 0,
                      "bytes_down": 0, "dropped_bytes": 0, "unread_bytes": 0, "upstream_failures": 0}
        self.started = time.monotonic()
        self.dirty = True
        self.last_stats = 0.0
        self.stop = False
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.listener.setblocking(False)
        self.sel.register(self.listener, selectors.EVENT_READ, ("accept", None))
        # Signals wake the selector through this pair; the handlers only note what came.
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.wake_w.setblocking(False)
        signal.set_wakeup_fd(self.wake_w.fileno(), warn_on_full_buffer=False)
        self.sel.register(self.wake_r, selectors.EVENT_READ, ("wake", None))
        self.pending = []
        for sig, what in ((signal.SIGUSR1, "freeze"), (signal.SIGTERM, "quit"), (signal.SIGINT, "quit")):
            signal.signal(sig, lambda _s, _f, what=what: self.pending.append(what))
        self.fifo = None
        self.fifo_buf = b""
        if args.control_fifo:
            self.open_fifo()

    def say(self, fmt, *a):
        print("freeze_proxy: %7.3f s: %s" % (time.monotonic() - self.started, fmt % a), file=sys.stderr, flush=True)

    # --- control -----------------------------------------------------------------------------------------
    def open_fifo(self):
        path = self.args.control_fifo
        if not os.path.exists(path):
            os.mkfifo(path, 0o600)
        # Opened read-write: the FIFO never reports EOF when a writer closes, and opening does not block.
        self.fifo = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        self.sel.register(self.fifo, selectors.EVENT_READ, ("fifo", None))

    def read_fifo(self):
        try:
            data = os.read(self.fifo, 4096)
        except BlockingIOError:
            return
        self.fifo_buf += data
        while b"\n" in self.fifo_buf:
            line, self.fifo_buf = self.fifo_buf.split(b"\n", 1)
            cmd = line.decode(errors="replace").strip()
            if cmd in ("freeze", "quit"):
                self.pending.append(cmd)
            elif cmd:
                print("freeze_proxy: unknown command %r (freeze, quit)" % cmd, file=sys.stderr)

    def run_pending(self):
        while self.pending:
            what = self.pending.pop(0)
            if what == "freeze":
                self.freeze_all()
            else:
                self.stop = True

    def freeze_all(self):
        """Every passing connection stops: no more reads or writes, nothing closed."""
        n = 0
        for c in list(self.conns):
            for s in (c.client, c.upstream):
                self.unwatch(s)
                self.stats["dropped_bytes"] += len(s.out)
                s.out.clear()
            c.frozen = True
            self.conns.discard(c)
            self.frozen.append(c)
            n += 1
        self.stats["freezes"] += 1
        self.stats["last_froze"] = n
        self.say("froze %d connection(s) (freeze %d): %s", n, self.stats["freezes"],
                 " ".join("#%d" % c.n for c in self.frozen[len(self.frozen) - n:]) or "-")
        self.dirty = True
        self.write_stats(force=True)

    # --- connections -------------------------------------------------------------------------------------
    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            self.stats["accepted"] += 1
            self.dirty = True
            family, addr = self.args.upstream
            upstream = socket.socket(family, socket.SOCK_STREAM)
            upstream.settimeout(5)
            try:
                upstream.connect(addr)
            except OSError as e:
                self.say("upstream %s: %s", addr, e)
                self.stats["upstream_failures"] += 1
                upstream.close()
                client.close()
                continue
            for s in (client, upstream):
                s.setblocking(False)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c = Conn(self.stats["accepted"], client, upstream)
            self.conns.add(c)
            self.say("#%d opened (%d passing, %d frozen)", c.n, len(self.conns), len(self.frozen))
            self.update(c)

    def unwatch(self, side):
        try:
            self.sel.unregister(side.sock)
        except (KeyError, ValueError):
            pass

    def update(self, c):
        """Registers each socket for what it can do now: read while its peer's backlog is small and no EOF came;
        write while bytes wait for it."""
        for s in (c.client, c.upstream):
            p = c.peer(s)
            ev = 0
            if not s.read_done and len(p.out) < HIGH_WATER:
                ev |= selectors.EVENT_READ
            if s.out:
                ev |= selectors.EVENT_WRITE
            if ev == 0:
                self.unwatch(s)
                continue
            try:
                key = self.sel.get_key(s.sock)
            except KeyError:
                self.sel.register(s.sock, ev, ("conn", c))
            else:
                if key.events != ev:
                    self.sel.modify(s.sock, ev, ("conn", c))

    def close(self, c):
        for s in (c.client, c.upstream):
            self.unwatch(s)
            s.sock.close()
        self.conns.discard(c)
        self.dirty = True
        self.say("#%d closed (%d passing, %d frozen)", c.n, len(self.conns), len(self.frozen))

    def on_event(self, c, sock, mask):
        s = c.client if sock is c.client.sock else c.upstream
        p = c.peer(s)
        if mask & selectors.EVENT_WRITE and s.out:
            try:
                n = s.sock.send(s.out)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError:
                self.close(c)
                return
            del s.out[:n]
            self.stats["bytes_down" if s is c.client else "bytes_up"] += n
            self.dirty = self.dirty or n > 0
        if mask & selectors.EVENT_READ and not s.read_done:
            try:
                data = s.sock.recv(CHUNK)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                self.close(c)
                return
            if data == b"":
                s.read_done = True
            elif data:
                if s is c.client and self.args.log_requests:
                    self.log_request(c, data)
                p.out += data
        # EOF from one side goes on to the other once what preceded it is written.
        for a in (c.client, c.upstream):
            b = c.peer(a)
            if a.read_done and not b.out and not b.write_done:
                b.write_done = True
                try:
                    b.sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
        if c.client.read_done and c.upstream.read_done and not c.client.out and not c.upstream.out:
            self.close(c)
            return
        self.update(c)

    def log_request(self, c, data):
        line = data.split(b"\r\n", 1)[0]
        method = line.split(b" ", 1)[0]
        if method in (b"GET", b"POST", b"PUT", b"PATCH", b"DELETE", b"HEAD", b"OPTIONS") and line.endswith(
                (b"HTTP/1.1", b"HTTP/1.0")):
            self.say("#%d %s", c.n, line[:300].decode(errors="replace"))

    # --- stats and loop ----------------------------------------------------------------------------------
    def unread(self):
        total = 0
        buf = struct.pack("i", 0)
        for c in self.frozen:
            for s in (c.client, c.upstream):
                try:
                    total += struct.unpack("i", fcntl.ioctl(s.sock.fileno(), termios.FIONREAD, buf))[0]
                except OSError:
                    pass
        return total

    def write_stats(self, force=False):
        now = time.monotonic()
        if not self.args.stats_file or not (force or (self.dirty and now - self.last_stats >= 0.1)):
            return
        self.stats["open"] = len(self.conns)
        self.stats["frozen"] = len(self.frozen)
        self.stats["unread_bytes"] = self.unread()
        self.stats["seconds"] = round(now - self.started, 3)
        write_atomic(self.args.stats_file, json.dumps(self.stats, sort_keys=True) + "\n")
        self.dirty = False
        self.last_stats = now

    def run(self):
        write_atomic(self.args.port_file, "%d\n" % self.listener.getsockname()[1])
        end = self.started + self.args.max_seconds
        while not self.stop:
            left = end - time.monotonic()
            if left <= 0:
                self.say("--max-seconds %g reached, exiting", self.args.max_seconds)
                break
            # Wake now and then to refresh the stats (unread_bytes grows while nothing else happens).
            for key, mask in self.sel.select(timeout=min(left, 0.5)):
                what, c = key.data
                if what == "accept":
                    self.accept()
                elif what == "wake":
                    try:
                        while self.wake_r.recv(512):
                            pass
                    except (BlockingIOError, InterruptedError):
                        pass
                elif what == "fifo":
                    self.read_fifo()
                elif c in self.conns:  # a socket of a connection frozen or closed this round is left alone
                    self.on_event(c, key.fileobj, mask)
            self.run_pending()
            if self.frozen:
                self.dirty = True
            self.write_stats()
        self.write_stats(force=True)
        for c in list(self.conns) + self.frozen:
            for s in (c.client, c.upstream):
                s.sock.close()
        self.listener.close()
        if self.fifo is not None:
            os.close(self.fifo)
        return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--upstream", required=True, type=loopback_addr, help="HOST:PORT to forward to (loopback)")
    ap.add_argument("--port-file", required=True, help="where to write the port it listens on")
    ap.add_argument("--stats-file", help="JSON counts, rewritten as they change")
    ap.add_argument("--control-fifo", help="a FIFO (created if absent) that takes the lines `freeze` and `quit`")
    ap.add_argument("--log-requests", action="store_true", help="log the request line of each HTTP request")
    ap.add_argument("--max-seconds", type=float, default=300, help="exit after this long (default 300)")
    args = ap.parse_args()
    if args.max_seconds <= 0:
        ap.error("--max-seconds must be positive")
    return Proxy(args).run()


if __name__ == "__main__":
    sys.exit(main())
