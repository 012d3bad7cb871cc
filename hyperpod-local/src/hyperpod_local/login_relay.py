"""The local stand-in for a login pool's Network Load Balancer: a TCP relay on the host for port 22 of the login nodes.

What it keeps of the load balancer (Elastic Load Balancing, "Health checks for Network Load Balancer target groups"):

* active health checks of each target, HTTP ``GET /health`` on the health port over the bridge, every
  ``interval_s``, a check failing after ``timeout_s``; a success is a 2xx or 3xx answer (the target group's matcher,
  200-399 by default); a target turns unhealthy after ``unhealthy_threshold`` failures in a row and healthy again
  after ``healthy_threshold`` successes (the target group's ``UnhealthyThresholdCount``/``HealthyThresholdCount``;
  the relay's defaults are short, for tests, where AWS's interval is 5 to 300 s);
* new connections go to healthy targets only; "If all targets fail health checks at the same time in all enabled
  Availability Zones, the load balancer fails open" ("The effect of the fail open is to allow traffic to all
  targets"), and so does the relay;
* an open connection is never cut when its target turns unhealthy: the construct disables the target group's
  connection termination for unhealthy targets (otherwise "the load balancer sends a TCP RST for packets received on
  the client connections associated with the target").

What it does not: the load balancer spreads flows by a hash of the connection's addresses and ports; the relay takes
the healthy targets in turn (round robin), so a test's split is even and reproducible. Passive health checks,
Availability Zones and client IP preservation are not modelled (a session's peer address on the node is the
bridge's). The relay listens on the host (127.0.0.1 by default) and makes its health checks and its connections to
the nodes from the cluster's switch namespace (``netns``, :mod:`hyperpod_local.netns`), where the bridge is: the host
itself has no route to the nodes. Used in-process by tests (:func:`for_cluster`); there is no command for it.
"""

from __future__ import annotations

import itertools
import selectors
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from hyperpod_local.netns import entered

SSH_PORT = 22
BUFFER = 65536

Check = Callable[[str], bool]
"""Whether one target answered its health check now."""


def http_check(health_port: int, timeout_s: float) -> Check:
    """``GET http://<target>:<health_port>/health``: healthy on 200-399 (the target group's default matcher)."""

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # straight to the node, never a proxy

    def check(address: str) -> bool:
        try:
            with opener.open(f"http://{address}:{health_port}/health", timeout=timeout_s) as answer:
                return bool(200 <= answer.status < 400)
        except urllib.error.HTTPError as error:
            return 200 <= error.code < 400
        except (OSError, ValueError):
            return False

    return check


@dataclass
class Target:
    address: str
    healthy: bool = False
    streak: int = 0
    """Consecutive results that disagree with :attr:`healthy` (a change once it reaches the threshold)."""
    sent: int = 0
    """New connections sent to this target."""
    open: int = 0
    changes: list[tuple[float, bool]] = field(default_factory=list)
    """(monotonic time, healthy) at each change of state."""


class LoginRelay:
    """Accepts TCP connections on ``listen`` and relays each to port ``port`` of one healthy target."""

    def __init__(
        self,
        targets: Sequence[str],
        check: Check,
        *,
        port: int = SSH_PORT,
        listen: tuple[str, int] = ("127.0.0.1", 0),
        interval_s: float = 1.0,
        healthy_threshold: int = 2,
        unhealthy_threshold: int = 2,
        clock: Callable[[], float] = time.monotonic,
        netns: str | None = None,
    ) -> None:
        if not targets:
            raise ValueError("a relay needs at least one target")
        if healthy_threshold < 1 or unhealthy_threshold < 1:
            raise ValueError("thresholds are 1 or more")
        self.targets = [Target(address) for address in targets]
        self.check = check
        self.port = port
        self.interval_s = interval_s
        self.healthy_threshold = healthy_threshold
        self.unhealthy_threshold = unhealthy_threshold
        self.clock = clock
        self.netns = netns
        self.lock = threading.Lock()
        self._turn = itertools.count()
        self._stop = threading.Event()
        self._listener = socket.create_server(listen)
        self._threads: list[threading.Thread] = []

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._listener.getsockname()[:2]
        return str(host), int(port)

    # --- health -------------------------------------------------------------------------------------------------

    def record(self, target: Target, ok: bool) -> None:
        """One health check's result: the target's state changes after its threshold of results in a row."""
        with self.lock:
            if ok == target.healthy:
                target.streak = 0
                return
            target.streak += 1
            if target.streak >= (self.healthy_threshold if ok else self.unhealthy_threshold):
                target.healthy, target.streak = ok, 0
                target.changes.append((self.clock(), ok))

    def _where(self) -> Any:
        """This thread in the switch namespace for the block (where the relay has one)."""
        return entered(self.netns) if self.netns else nullcontext()

    def check_all(self) -> None:
        with self._where():
            results = [(target, self.check(target.address)) for target in self.targets]
        for target, ok in results:
            self.record(target, ok)

    def _checking(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.check_all()

    # --- connections ----------------------------------------------------------------------------------------------

    def choose(self) -> Target:
        """The next healthy target in turn; all of them when none is healthy (fail open)."""
        with self.lock:
            pool = [t for t in self.targets if t.healthy] or self.targets
            target = pool[next(self._turn) % len(pool)]
            target.sent += 1
            return target

    def _accepting(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client, self.choose()), daemon=True).start()

    def _relay(self, client: socket.socket, target: Target) -> None:
        try:
            with self._where():
                upstream = socket.create_connection((target.address, self.port), timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self.lock:
            target.open += 1
        selector = selectors.DefaultSelector()
        selector.register(client, selectors.EVENT_READ, upstream)
        selector.register(upstream, selectors.EVENT_READ, client)
        try:
            while not self._stop.is_set():
                for key, _ in selector.select(timeout=0.5):
                    source, sink = key.fileobj, key.data
                    data = source.recv(BUFFER)  # type: ignore[union-attr]
                    if not data:
                        return
                    sink.sendall(data)
        except OSError:
            return
        finally:
            selector.close()
            client.close()
            upstream.close()
            with self.lock:
                target.open -= 1

    # --- life -----------------------------------------------------------------------------------------------------

    def start(self) -> LoginRelay:
        """A first round of checks (a target healthy on its first success, as a newly registered target that passes
        its initial check), then the checker and the acceptor in the background."""
        with self._where():
            first = [(target, self.check(target.address)) for target in self.targets]
        for target, ok in first:
            if ok:
                target.healthy = True
                target.changes.append((self.clock(), True))
        for loop in (self._checking, self._accepting):
            thread = threading.Thread(target=loop, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> LoginRelay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def split(self) -> dict[str, int]:
        """New connections sent to each target so far."""
        with self.lock:
            return {t.address: t.sent for t in self.targets}

    def healthy(self) -> dict[str, bool]:
        with self.lock:
            return {t.address: t.healthy for t in self.targets}


@contextmanager
def for_cluster(cluster: Any, nodes: Sequence[str], health_port: int, **options: Any) -> Iterator[LoginRelay]:
    """A running relay in front of ``nodes`` of a local cluster (:class:`hyperpod_local.LocalCluster`), checking
    their health port from the cluster's switch namespace; stopped when the block ends."""
    relay = LoginRelay(
        [cluster.node(name).ip for name in nodes],
        http_check(health_port, options.pop("timeout_s", 1.0)),
        netns=cluster.namespaces.switch,
        **options,
    )
    with relay:
        yield relay
