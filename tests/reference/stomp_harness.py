"""A socket-free STOMP harness: a hub, sessions, a virtual clock; speak bytes, read frames."""

from __future__ import annotations

from ackspec.reference.broker.auth import Authenticator
from ackspec.reference.broker.core import BrokerCore
from ackspec.reference.broker.model import CoreConfig
from ackspec.reference.broker.trace import Tracer
from ackspec.reference.faults import FaultInjector
from ackspec.reference.parts import REFERENCE_PARTS, BrokerParts
from ackspec.reference.stomp.codec import FrameParser, encode
from ackspec.reference.stomp.frames import Frame
from ackspec.reference.stomp.session import SessionConfig, StompSession


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Broker:
    def __init__(self, config: CoreConfig | None = None, *, auth: Authenticator | None = None,
                 session_config: SessionConfig | None = None, journaling: bool = False,
                 parts: BrokerParts = REFERENCE_PARTS) -> None:
        self.parts = parts
        self.clock = Clock()
        self.faults = FaultInjector()
        self.tracer = Tracer()
        self.core: BrokerCore = parts.core(config, tracer=self.tracer, faults=self.faults)
        self.hub = parts.hub(self.core)
        self.hub.journaling = journaling
        self.auth = auth or Authenticator()
        self.session_config = session_config or SessionConfig(heartbeat_send_ms=0, heartbeat_receive_ms=0)
        self.sessions: list[StompSession] = []
        self._n = 0

    def client(self, version: str = "1.2", connect: bool = True, **headers: str) -> Client:
        self._n += 1
        s = self.parts.stomp_session(f"c{self._n}", self.hub, config=self.session_config, auth=self.auth,
                                     clock=self.clock, faults=self.faults, tracer=self.tracer)
        self.sessions.append(s)
        c = Client(self, s)
        if connect:
            c.send("CONNECT", **{"accept-version": version, "host": "/", **headers})
            f = c.frames()
            assert f and f[0].command == "CONNECTED", f
        return c

    def sync(self) -> None:
        """Pretend the journal fsync'd everything."""
        self.hub.take_journal()
        self.hub.mark_synced(self.hub.appended)

    def tick(self, dt: float = 0.0) -> None:
        self.clock.now += dt
        for s in self.sessions:
            s.tick()


class Client:
    def __init__(self, broker: Broker, session: StompSession) -> None:
        self.broker = broker
        self.session = session
        self.parser = FrameParser()
        self.received: list[Frame] = []

    def send(self, command: str, body: bytes = b"", **headers: str) -> None:
        self.raw(encode(Frame(command, tuple((k.replace("_", "-"), v) for k, v in headers.items()), body),
                        self.session.version if command not in ("CONNECT", "STOMP") else "1.2"))

    def raw(self, data: bytes) -> None:
        self.session.receive_data(data)

    def frames(self) -> list[Frame]:
        """Every frame received since the last call (from this session's output)."""
        out = [f for f in self.parser.feed(self.session.take_output()) if isinstance(f, Frame)]
        return out

    @property
    def closed(self) -> bool:
        return self.session.close_requested
