"""Real Java JMS client libraries under test, through the Java shim (adapters/java, docs/shim-protocol.md).

``--ackspec-client qpid-jms`` (``artemis-jms``, ``activemq-jms``) runs ``java -jar
ackspec-jms-shim.jar qpid`` (``artemis``, ``activemq``): the shim drives Apache Qpid JMS (AMQP 1.0),
the Artemis Jakarta client (core protocol) or the ActiveMQ Classic client (OpenWire) with plain
Jakarta Messaging calls. The jar is built by ``bash adapters/java/build.sh``; ``ACKSPEC_JMS_SHIM_JAR``
points at another copy.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ackspec.adapters.clients import UnknownClient
from ackspec.adapters.shim.client import ShimCUT

JAR_ENV = "ACKSPEC_JMS_SHIM_JAR"
BUILD_HINT = "bash adapters/java/build.sh"
# a short-lived JVM per client under test: start fast and stay small on a shared 2-core machine
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss512k", "-Xmx256m")


class ShimNotBuilt(UnknownClient):
    """The Java shim's jar (or java itself) is missing: say how to get it, in one line."""


def shim_jar() -> Path:
    """The shim's jar: ``$ACKSPEC_JMS_SHIM_JAR``, else adapters/java/target of the source tree."""
    configured = os.environ.get(JAR_ENV)
    if configured:
        path = Path(configured)
    else:
        path = Path(__file__).resolve().parents[3] / "adapters" / "java" / "target" / "ackspec-jms-shim.jar"
    if not path.is_file():
        raise ShimNotBuilt(f"the Java JMS shim is not built ({path} missing): run {BUILD_HINT}, or set {JAR_ENV}")
    if shutil.which("java") is None:
        raise ShimNotBuilt("java is not on PATH: the Java JMS shim needs a Java 17 runtime")
    return path


class JmsShimCUT(ShimCUT):
    """One Java JMS library behind the shim; ``shim_argument`` is the shim's argument."""

    shim_argument = ""

    def __init__(self) -> None:
        super().__init__(["java", *JVM_FLAGS, "-jar", str(shim_jar()), self.shim_argument])

    @classmethod
    def check_available(cls) -> None:
        """Raise :class:`ShimNotBuilt` (one line, saying how to build it) unless the shim can start."""
        shim_jar()


class QpidJmsCUT(JmsShimCUT):
    shim_argument = "qpid"


class ArtemisJmsCUT(JmsShimCUT):
    shim_argument = "artemis"


class ActiveMQJmsCUT(JmsShimCUT):
    shim_argument = "activemq"
