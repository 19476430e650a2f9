"""Driver settings from profiles and URLs, and which driver a URL opens."""

from __future__ import annotations

from pathlib import Path

import pytest

from ackspec.adapters.base import Adapter, Capability
from ackspec.adapters.reference import REFERENCE_SETTINGS, ReferenceAdapter
from ackspec.adapters.registry import UnknownScheme, factory_for, open_adapter, register, schemes
from ackspec.adapters.settings import DEFAULT_PREFETCH_HEADERS, STOMP_STANDARD_CAPABILITIES, TargetSettings
from ackspec.adapters.stomp_py import StompPyAdapter
from ackspec.cli import main
from ackspec.conformance.target import load_profile
from ackspec.history import Recorder

# -- settings ------------------------------------------------------------------------------


def test_defaults_fit_a_plain_stomp_broker() -> None:
    s = TargetSettings()
    assert s.prefetch_headers == DEFAULT_PREFETCH_HEADERS
    assert s.capabilities == STOMP_STANDARD_CAPABILITIES
    assert Capability.PREFETCH not in s.capabilities  # an extension: a profile must claim it


def test_url_gives_host_port_credentials_and_vhost() -> None:
    s = TargetSettings.from_url("stomp://guest:p%40ss@broker.example:61614/?vhost=%2F")
    assert (s.host, s.port, s.login, s.passcode, s.vhost) == ("broker.example", 61614, "guest", "p@ss", "/")


def test_url_keeps_base_settings_it_does_not_mention() -> None:
    base = TargetSettings(login="admin", queue_prefix="/amq/queue/")
    s = TargetSettings.from_url("stomp://127.0.0.1:1234", base)
    assert (s.port, s.login, s.queue_prefix) == (1234, "admin", "/amq/queue/")


def test_bad_port_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="bad port in target URL"):
        TargetSettings.from_url("stomp://127.0.0.1:notaport")


@pytest.mark.parametrize(("profile", "prefetch", "count", "dlq"), [
    ("rabbitmq-3.10", ("prefetch-count",), None, None),
    ("activemq-5.17", ("activemq.prefetchSize",), None, "/queue/ActiveMQ.DLQ"),
    ("artemis-2", ("consumer-window-size",), None, None),
])
def test_settings_from_real_profiles(profile: str, prefetch: tuple[str, ...], count: str | None,
                                     dlq: str | None) -> None:
    data = load_profile(profile)
    s = TargetSettings.from_profile(data)
    assert s.prefetch_headers == prefetch
    assert s.dead_letter_queue == dlq
    if count is None:
        assert s.delivery_count_headers == TargetSettings().delivery_count_headers  # not narrowed
    assert s.login == (data.get("connection") or {}).get("login")
    features = set(data["features"])
    assert {c.value for c in s.capabilities} == features & {c.value for c in Capability}


def test_artemis_profile_claims_no_message_count_prefetch() -> None:
    """Its window is in bytes: the driver must not send a prefetch header (see the stomp.py tests)."""
    s = TargetSettings.from_profile(load_profile("artemis-2"))
    assert Capability.PREFETCH not in s.capabilities


def test_profile_options_and_unknown_features() -> None:
    s = TargetSettings.from_profile({
        "connection": {"login": "u", "passcode": "p", "port": 7},
        "settings": {"prefetch_header": ["a", "b"], "delivery_count_header": "x-count", "delivery_count_base": 0,
                     "max_redeliveries": 3, "something_else": 1},
        "features": ["queues", "not-a-capability"],
    })
    assert (s.login, s.passcode, s.port, s.prefetch_headers) == ("u", "p", 7, ("a", "b"))
    assert s.delivery_count_headers == (("x-count", 0),)
    assert s.max_redeliveries == 3 and s.options["something_else"] == 1
    assert s.capabilities == frozenset({Capability.QUEUES})


def test_empty_profile_is_the_default() -> None:
    assert TargetSettings.from_profile(None) == TargetSettings()


# -- registry ------------------------------------------------------------------------------


def test_builtin_schemes_resolve() -> None:
    assert factory_for("stomp://127.0.0.1:61613") is StompPyAdapter
    assert factory_for("reference://embedded") is ReferenceAdapter
    assert factory_for("STOMP://127.0.0.1:61613") is StompPyAdapter  # schemes are case-insensitive
    assert {"stomp", "amqp", "reference"} <= set(schemes())


def test_sub_scheme_falls_back_to_its_base() -> None:
    assert factory_for("stomp+ssl://127.0.0.1:61613") is StompPyAdapter


def test_registered_factory_wins_and_gets_its_arguments(tmp_path: Path) -> None:
    seen: dict[str, object] = {}

    def factory(url: str, recorder: Recorder, *, timeout: float, settings: TargetSettings | None) -> Adapter:
        seen.update(url=url, timeout=timeout, settings=settings)
        return StompPyAdapter("stomp://127.0.0.1:1", recorder, timeout=timeout, settings=settings)

    register("ackspec-test", factory)
    adapter = open_adapter("ackspec-test://x", Recorder("r", path=tmp_path / "h.jsonl"), timeout=1.5,
                           settings=REFERENCE_SETTINGS)
    assert isinstance(adapter, StompPyAdapter)
    assert seen == {"url": "ackspec-test://x", "timeout": 1.5, "settings": REFERENCE_SETTINGS}


@pytest.mark.parametrize(("url", "message"), [
    ("foo://x", "no driver for foo:// targets"),
    ("no-scheme-here", "has no scheme"),
])
def test_unknown_scheme_is_one_clear_error(url: str, message: str) -> None:
    with pytest.raises(UnknownScheme, match=message):
        factory_for(url)


# -- the command line: a bad target is one line and exit 2 --------------------------------


@pytest.mark.parametrize(("url", "message"), [
    ("foo://x", "no driver for foo:// targets"),
    ("nourl", "has no scheme"),
    ("stomp://127.0.0.1:notaport", "bad port in target URL"),
    ("stomp://127.0.0.1:1", "nothing listening at stomp://127.0.0.1:1"),
])
def test_bad_target_url_is_one_line(url: str, message: str, capsys: pytest.CaptureFixture[str],
                                    tmp_path: Path) -> None:
    code = main(["run", "--target", url, "--no-report", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err


def test_websocket_frames_in_text_messages_drop_binary_bodies() -> None:
    """``?frames=text`` (a listener that ignores binary messages, as ActiveMQ 6's): frames go in text
    messages, so a body that is not UTF-8 cannot be sent and its tests are not applicable."""
    text = TargetSettings.from_url("ws://127.0.0.1:61621/?frames=text")
    assert text.websocket_text and text.websocket_path == "/"
    assert not TargetSettings.from_url("ws://127.0.0.1:61621/").websocket_text
    base = TargetSettings(capabilities=frozenset({Capability.BINARY_BODY, Capability.QUEUES}))
    recorder = Recorder("t", target="ws")
    assert Capability.BINARY_BODY not in StompPyAdapter("ws://h:1/?frames=text", recorder, settings=base).capabilities
    assert Capability.BINARY_BODY in StompPyAdapter("ws://h:1/", recorder, settings=base).capabilities
