"""What a conformance test holds: the adapter, unique destinations, clients, barriers.

One :class:`Harness` per test (the ``harness`` fixture). It opens clients through
the adapter (so every operation is recorded), names destinations uniquely per
run and test, closes whatever the test left open, and offers the two waiting
patterns the suite allows:

* waiting *for* something: a receive, receipt or event with a timeout;
* waiting for the *absence* of something: a **barrier**. A sentinel message is
  sent behind the messages that must not come; once the sentinel arrived,
  anything that was going to arrive before it has arrived. No sleeps.

Intent: every history starts with the harness's declaration that the test means
every message it sends to be consumed by its end (an ``expect`` ``delivered``
record). A test that leaves messages on the broker or drops them on purpose says
so with :meth:`Harness.expect_left` or :meth:`Harness.expect_dropped`; the history
checks then count an undeclared, confirmed, never-consumed message of a test that
ran to its end as a decisive loss (docs/history-format.md). A property test wraps its
body in :meth:`Harness.example`, so the sends of an example hypothesis abandons between
draws are declared left without the test handling it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, ParamSpec, TypeVar

from hypothesis.errors import StopTest, UnsatisfiedAssumption

from ackspec.adapters.base import AckMode, Adapter, Capability, Client, Delivery, NotSupported
from ackspec.adapters.settings import TargetSettings
from ackspec.conformance.cited import Citations
from ackspec.conformance.rawstomp import RawStomp, RawStompWs
from ackspec.conformance.verdicts import RequirementViolation
from ackspec.history import INTENT_KEY, Intent, Op, Recorder
from ackspec.history.checks import check_history as check_history_records

SENTINEL_HEADER = "ackspec-sentinel"
LOSS_CLEANUP_GRACE = 3  # receive timeouts a broker gets to give back what a dead connection held
DRAIN_RETURN_GRACE = 1  # receive timeouts a drain waits past its sentinel for what an ended connection gave back


P = ParamSpec("P")
R = TypeVar("R")

ABANDONED = (StopTest, UnsatisfiedAssumption)
"""How hypothesis ends an example early without a verdict: its data ran out between draws (``StopTest``,
hypothesis' own control-flow exception, which it catches itself), or an ``assume`` rejected it."""


def seqs(deliveries: Iterable[Delivery]) -> list[int]:
    """The ackspec-seq of each delivery (-1 where a delivery has none, e.g. a mangled header)."""
    return [d.seq if d.seq is not None else -1 for d in deliveries]


class Harness:
    """Per-test access to the target."""

    def __init__(self, adapter: Adapter, recorder: Recorder, *, run_tag: str, test_index: int,
                 timeout: float, settings: TargetSettings, broker: Any = None,
                 restart: Callable[[], None] | None = None, requirements: Iterable[str] = (),
                 knobs: Mapping[str, Any] | None = None) -> None:
        """``restart``: how to restart a real target (``--restart-command``); the embedded broker's
        adapter restarts it itself. ``requirements``: what the test cites, in citing order (the plugin
        passes its decorator's IDs): what the checks of :meth:`check`, :meth:`expect_n` and
        :meth:`expect_n_after_loss` may judge (see :mod:`ackspec.conformance.cited`). ``knobs``: the
        target profile's ``knobs`` (the values it declares for a rule's parameters, e.g. its publish-window
        timer), empty without a profile."""
        self.adapter = adapter
        self.knobs: Mapping[str, Any] = MappingProxyType(dict(knobs or {}))
        self.citations = Citations(recorder.test or "(harness)", tuple(requirements))
        self._restart = restart
        self.recorder = recorder
        self.timeout = timeout
        # the driver's settings carry the real endpoint (the embedded broker's ephemeral port)
        driver_settings = getattr(adapter, "settings", None)
        self.settings = driver_settings if isinstance(driver_settings, TargetSettings) else settings
        self.broker = broker
        self._prefix = f"ackspec.{run_tag}.{test_index}"
        self._names = itertools.count(1)
        self._processes = itertools.count(1)
        self._clients: list[Client] = []
        self._raws: list[RawStomp] = []
        self._declare(Intent.DELIVERED, reason="harness default: every message sent is consumed by the end")

    def check(self, condition: object, message: str, operations: Iterable[int] = (),
              requirement: str | None = None) -> None:
        """Assert ``condition`` on behalf of ``requirement`` (``req.NAME``; default: the test's only cited one)."""
        charged = self.citations.judged(requirement)
        if not condition:
            raise RequirementViolation(charged, message, operations)

    # -- naming ------------------------------------------------------------------------

    def queue(self, tag: str = "q") -> str:
        return f"{self.settings.queue_prefix}{self._prefix}.{next(self._names)}.{tag}"

    def topic(self, tag: str = "t") -> str:
        return f"{self.settings.topic_prefix}{self._prefix}.{next(self._names)}.{tag}"

    # -- capabilities ------------------------------------------------------------------

    def require(self, *caps: Capability) -> None:
        self.adapter.require(*caps)

    def has(self, cap: Capability) -> bool:
        return cap in self.adapter.capabilities

    # -- clients -------------------------------------------------------------------------

    def client(self, process: str | None = None, **options: Any) -> Client:
        """Open a recorded connection; closed at the end of the test if still open."""
        client = self.adapter.client(process or f"c{next(self._processes)}", **options)
        self._clients.append(client)
        return client

    def raw(self) -> RawStomp:
        """A raw-socket STOMP connection (not yet CONNECTed) to a STOMP target (over a WebSocket for a
        ``ws://`` target)."""
        if self.adapter.protocol != "stomp":
            raise NotSupported("raw-stomp", f"{self.adapter.name} does not speak STOMP")
        path = self.settings.websocket_path
        raw = RawStomp(self.settings.host, self.settings.port, timeout=self.timeout,
                       tls=self.settings.client_tls_context()) if path is None else RawStompWs(
            self.settings.host, self.settings.port, timeout=self.timeout, tls=self.settings.client_tls_context(),
            path=path, text=self.settings.websocket_text)
        self._raws.append(raw)
        return raw

    def raw_connected(self, heart_beat: str = "0,0") -> RawStomp:
        raw = self.raw()
        reply = raw.connect(self.settings.login, self.settings.passcode, self.settings.vhost, heart_beat=heart_beat)
        if reply is None or reply.command != "CONNECTED":
            detail = "no reply" if reply is None else f"{reply.command} {reply.headers.get('message', '')}"
            raise AssertionError(f"raw CONNECT was not answered with CONNECTED ({detail})")
        return raw

    # -- sending and receiving ---------------------------------------------------------------

    def send_seq(self, client: Client, destination: str, seqs: Iterable[int], *, producer: str = "p1",
                 persistent: bool = False, confirm: bool = True, transaction: str | None = None,
                 body: bytes | None = None) -> list[int]:
        sent = []
        for seq in seqs:
            client.send(destination, body if body is not None else f"m{seq}".encode(), seq=seq, producer=producer,
                        persistent=persistent, confirm=confirm, transaction=transaction)
            sent.append(seq)
        return sent

    def receive_n(self, client: Client, subscription: str, n: int, *, timeout: float | None = None) -> list[Delivery]:
        """Up to ``n`` deliveries, each waited for with the timeout; fewer when the target stops sending."""
        got: list[Delivery] = []
        for _ in range(n):
            delivery = client.receive(subscription, timeout)
            if delivery is None:
                break
            got.append(delivery)
        return got

    def expect_n(self, client: Client, subscription: str, n: int, requirement: str | None = None,
                 what: str = "messages", *, timeout: float | None = None) -> list[Delivery]:
        """``n`` deliveries, or a violation of ``requirement`` (``req.NAME``; default: the test's only cited one)."""
        charged = self.citations.judged(requirement)
        got = self.receive_n(client, subscription, n, timeout=timeout)
        if len(got) < n:
            raise RequirementViolation(charged, f"expected {n} {what}, got {len(got)}: "
                                       f"seqs {[d.seq for d in got]}", self.last_ops(1))
        return got

    def expect_n_after_loss(self, client: Client, subscription: str, n: int, requirement: str | None = None,
                            what: str = "redeliveries") -> list[Delivery]:
        """``n`` deliveries that come back because another connection died (crash, abrupt close).

        A broker cleans up a dead connection asynchronously (Artemis fails the connection on one
        thread and rolls its session back on another), so what it gives back may come later
        than a plain receive timeout. A shortfall gets a further grace of
        ``LOSS_CLEANUP_GRACE`` receive timeouts before it counts, and the violation says
        what came in time, what came late and what never came, so a slow clean-up is not
        mistaken for a loss and a loss is not blamed on a slow clean-up.
        """
        charged = self.citations.judged(requirement)
        started = time.monotonic()
        got = self.receive_n(client, subscription, n)
        if len(got) == n:
            return got
        on_time = len(got)
        late = self.receive_n(client, subscription, n - on_time, timeout=self.timeout * LOSS_CLEANUP_GRACE)
        got += late
        if len(got) < n:
            raise RequirementViolation(
                charged,
                f"expected {n} {what}, got {len(got)} in {time.monotonic() - started:.1f} s: seqs "
                f"{seqs(got[:on_time])} within the {self.timeout:g} s receive timeout"
                + (f", then {seqs(late)} late" if late else "") + "; the rest never came",
                self.last_ops(1))
        return got

    def sentinel(self, client: Client, destination: str, *, persistent: bool = False) -> str:
        """Send a sentinel (no seq, so history checks ignore it); returns its token."""
        token = uuid.uuid4().hex[:12]
        client.send(destination, b"sentinel", headers={SENTINEL_HEADER: token}, persistent=persistent)
        return token

    def until_sentinel(self, client: Client, subscription: str, token: str, *,
                       ack_each: bool = False, timeout: float | None = None) -> list[Delivery]:
        """Everything that arrives before the sentinel ``token`` (raises if the sentinel never comes)."""
        before: list[Delivery] = []
        while True:
            delivery = client.receive(subscription, timeout)
            if delivery is None:
                raise AssertionError(f"barrier: sentinel {token} did not arrive; "
                                     f"got seqs {[d.seq for d in before]} before the timeout")
            if ack_each and delivery.ack_id is not None:
                client.ack(delivery)
            if delivery.headers.get(SENTINEL_HEADER) == token:
                return before
            if delivery.headers.get(SENTINEL_HEADER) is None:
                before.append(delivery)

    def barrier(self, producer: Client, destination: str, consumer: Client, subscription: str,
                *, ack_each: bool = False) -> list[Delivery]:
        """Send a sentinel and collect what the consumer gets before it."""
        token = self.sentinel(producer, destination)
        return self.until_sentinel(consumer, subscription, token, ack_each=ack_each)

    def drain(self, destination: str, *, process: str = "drain", ack: AckMode = AckMode.AUTO,
              returning: int = 0) -> list[Delivery]:
        """Open a fresh consumer and take everything currently on a queue (barrier-terminated).

        ``returning``: how many messages a connection that just ended should have given back. A broker
        may put them back after the sentinel (Artemis returns a closed session's messages on another
        thread, and they came well within a second after it), so a shortfall gets ``DRAIN_RETURN_GRACE``
        receive timeouts past the sentinel before the caller's model counts the rest lost.
        """
        consumer = self.client(process)
        sub = consumer.subscribe(destination, ack=ack)
        got = self.barrier(consumer, destination, consumer, sub, ack_each=ack is not AckMode.AUTO)
        if len(got) < returning:
            got += self.receive_n(consumer, sub, returning - len(got), timeout=self.timeout * DRAIN_RETURN_GRACE)
        consumer.disconnect()
        return got

    # -- intent -------------------------------------------------------------------------------

    def expect_left(self, destination: str, seqs: Iterable[int] | None = None, *, producer: str | None = None,
                    reason: str = "") -> None:
        """Declare messages deliberately left on the broker: the history checks do not count them lost.

        ``seqs`` None covers every message sent to ``destination`` (by ``producer``, if given).
        """
        self._declare_messages(Intent.LEFT, destination, seqs, producer, reason)

    def expect_dropped(self, destination: str, seqs: Iterable[int] | None = None, *, producer: str | None = None,
                       reason: str = "") -> None:
        """Declare messages deliberately dropped (NACKed to a dead-letter queue the test does not drain,
        expired, lost in a restart the test provokes): the history checks do not count them lost."""
        self._declare_messages(Intent.DROPPED, destination, seqs, producer, reason)

    def example(self, body: Callable[P, R]) -> Callable[P, R]:
        """Wrap a property's body, under ``@given``: an example hypothesis abandons has its sends declared left.

        Hypothesis may stop an example between two draws (its data ran out, or an ``assume`` failed); a
        property that sent messages before drawing then leaves them on the broker, undrained, with no
        verdict of its own, and the history checks would count them lost. Every message the abandoned
        example sent is declared left (a consumed one stays consumed: ``left`` only exempts from loss).
        An example that fails keeps its history as it is: a loss there is evidence.
        """
        @functools.wraps(body)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            start = len(self.recorder.records)
            try:
                return body(*args, **kwargs)
            except ABANDONED:
                self._declare_sent_since(start, "hypothesis abandoned the example (data ran out or assume failed)")
                raise
        return run

    def _declare_sent_since(self, start: int, reason: str) -> None:
        sent = {(r.destination, r.producer, r.seq) for r in self.recorder.records[start:]
                if r.op is Op.SEND and r.destination is not None and r.seq is not None}
        for destination, producer, seq in sorted(sent, key=lambda m: (str(m[0]), str(m[1]), m[2] or 0)):
            self._declare(Intent.LEFT, reason, destination=destination, producer=producer, seq=seq)

    def _declare_messages(self, intent: Intent, destination: str, seqs: Iterable[int] | None,
                          producer: str | None, reason: str) -> None:
        for seq in [None] if seqs is None else list(seqs):
            self._declare(intent, reason, destination=destination, producer=producer, seq=seq)

    def _declare(self, intent: Intent, reason: str = "", **scope: Any) -> None:
        value = {INTENT_KEY: str(intent), **({"reason": reason} if reason else {})}
        self.recorder.event(Op.EXPECT, "harness", value=value, **scope)

    # -- target control ---------------------------------------------------------------------

    def restart_broker(self, *, crash: bool = False) -> None:
        """Restart the target; ``crash=True`` simulates a power loss (unsynced writes are lost)."""
        self.require(Capability.BROKER_RESTART)
        restart: Callable[..., None] | None = getattr(self.adapter, "restart_broker", None) or self._restart
        if restart is None:
            raise NotSupported(Capability.BROKER_RESTART, self.adapter.name)
        if crash and "crash" not in inspect.signature(restart).parameters:
            raise NotSupported(Capability.BROKER_RESTART, f"{self.adapter.name} cannot simulate a power loss")
        for client in self._clients:
            _quiet_close(client)
        if crash:
            restart(crash=True)
        else:
            restart()

    @contextlib.contextmanager
    def slow_fsync(self, seconds: float) -> Iterator[None]:
        """A slow disk for the block: every fsync of the target's journal takes ``seconds`` longer."""
        self.require(Capability.FAULT_INJECTION)
        slow = getattr(self.adapter, "slow_fsync", None)
        if slow is None:
            raise NotSupported(Capability.FAULT_INJECTION, f"{self.adapter.name} cannot slow its disk")
        slow(seconds)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                slow(0.0)

    @property
    def faults(self) -> Any:
        self.require(Capability.FAULT_INJECTION)
        return getattr(self.adapter, "faults", None)

    # -- oracles ----------------------------------------------------------------------------

    def last_ops(self, n: int) -> list[int]:
        return [r.index for r in self.recorder.records[-n:]]

    def check_history(self, kinds: Iterable[str] | None = None) -> None:
        """Run the history checks on this test's history (an extra, independent oracle; the pipeline runs the
        same rules over many runs).

        ``kinds`` restricts the anomaly kinds that count. Messages declared with
        :meth:`expect_left` or :meth:`expect_dropped` are never reported lost; call it
        after the test has drained what it sent, or leave ``lost`` out of ``kinds``.
        """
        wanted = set(kinds) if kinds is not None else None
        for anomaly in check_history_records(self.recorder.records):
            if wanted is None or str(anomaly.kind) in wanted:
                raise RequirementViolation(anomaly.requirement, f"history check: {anomaly.kind} "
                                           f"seq={anomaly.seq}: {anomaly.detail}", anomaly.operations)

    # -- clean-up -----------------------------------------------------------------------------

    def close(self) -> None:
        for client in self._clients:
            _quiet_close(client)
        for raw in self._raws:
            raw.close()
        self._clients.clear()
        self._raws.clear()

    def __iter__(self) -> Iterator[Client]:
        return iter(self._clients)


def _quiet_close(client: Client) -> None:
    """Close without recording (clean-up is not part of the history)."""
    close = getattr(client, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):  # best effort clean-up
            close()
