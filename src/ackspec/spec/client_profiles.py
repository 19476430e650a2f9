"""Client profiles: the known deviations of a client library, as data (``clients/NAME.yaml``).

A broker's known deviations live in ``targets/``; a client library's live here, one profile per
library and version, validated against ``schema/client.schema.json``. A profile names the
registered client that drives the library (``ackspec run --client NAME``), the protocol it speaks
and the brokers it was observed against; each deviation has a reason and what a run observed, and
excuses only what it documents: the tests it names (``test``, required), optionally only a failure
whose message shows what was observed (``check``), and only on some of those brokers
(``brokers``). A run of the client-side suite judges with it exactly as a broker run judges with
a target profile: a listed deviation that fails is ``deviation``, one that stops happening is
``stale`` and fails the run, and any other failure of that requirement stays a failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ackspec.spec.catalogue import load_catalogue
from ackspec.spec.data import CLIENTS_DIR
from ackspec.spec.errors import SpecError
from ackspec.spec.profile_files import available, check_name, check_requirement, observed_in, profile_file
from ackspec.spec.validation import check, read_yaml, where


@dataclass(frozen=True, slots=True)
class ClientDeviation:
    """A known, explained way a client library breaks a requirement."""

    requirement: str
    reason: str
    observed: str
    status: str = "seeded"
    test: str | None = None  # pytest node-id glob of the client-side suite tests it excuses
    brokers: tuple[str, ...] = ()  # limited to these brokers (empty: every broker of the profile)
    intermittent: bool = False
    link: str | None = None
    check: str | None = None  # text the failure's message must contain ('*' any text): what was observed

    def applies_on(self, broker: str | None) -> bool:
        return not self.brokers or broker is None or broker in self.brokers

    def excuses(self, message: str) -> bool:
        """Whether a failure with this message is the behaviour documented: ``check`` found in it, ``*``
        standing for any text and every other character literal (the same rule as a target profile's)."""
        return observed_in(self.check, message)


@dataclass(frozen=True, slots=True)
class ClientProfile:
    """One client library at one version: what drives it, what it speaks, where it deviates."""

    name: str
    title: str
    description: str
    path: Path
    client: str
    library: str
    version: str
    protocol: str
    brokers: tuple[str, ...]
    deviations: tuple[ClientDeviation, ...]

    @property
    def default_broker(self) -> str:
        return self.brokers[0]

    def deviations_on(self, broker: str | None) -> tuple[ClientDeviation, ...]:
        return tuple(d for d in self.deviations if d.applies_on(broker))


def available_client_profiles(root: Path | None = None) -> list[str]:
    return available(Path(root) if root is not None else CLIENTS_DIR)


def client_profile_path(name_or_path: str | Path, root: Path | None = None) -> Path:
    return profile_file(name_or_path, Path(root) if root is not None else CLIENTS_DIR, "client profile")


def load_client_profile(name_or_path: str | Path, *, catalogue_root: Path | None = None,
                        root: Path | None = None) -> ClientProfile:
    """The validated client profile; its deviations must name requirements of the catalogue."""
    path = client_profile_path(name_or_path, root)
    data, text = read_yaml(path)
    check(data, "client", path, text)
    check_name(data, path, text)
    brokers = tuple(data["brokers"])
    deviations = tuple(_deviation(path, text, index, raw, brokers, catalogue_root)
                       for index, raw in enumerate(data["deviations"]))
    _no_repeats(path, text, deviations)
    return ClientProfile(name=data["name"], title=data["title"], description=" ".join(data["description"].split()),
                         path=path, client=data["client"], library=data["library"], version=str(data["version"]),
                         protocol=data["protocol"], brokers=brokers, deviations=deviations)


def _deviation(path: Path, text: str, index: int, raw: dict[str, Any], brokers: tuple[str, ...],
               catalogue_root: Path | None) -> ClientDeviation:
    here = f"{where(path, text, ['deviations', index])}: deviations[{index}]"
    catalogue = load_catalogue(catalogue_root)
    rid = raw["requirement"]
    check_requirement(rid, catalogue, here)
    limited = tuple(raw.get("brokers") or ())
    strangers = [b for b in limited if b not in brokers]
    if strangers:
        raise SpecError(f"{here}.brokers: {', '.join(strangers)} not among the profile's brokers "
                        f"({', '.join(brokers)})")
    return ClientDeviation(requirement=rid, reason=" ".join(raw["reason"].split()),
                           observed=" ".join(raw["observed"].split()), status=raw.get("status", "seeded"),
                           test=raw.get("test"), brokers=limited, intermittent=bool(raw.get("intermittent", False)),
                           link=raw.get("link"), check=raw.get("check"))


def _no_repeats(path: Path, text: str, deviations: tuple[ClientDeviation, ...]) -> None:
    """One entry per requirement, test, check and brokers: two would make the verdict depend on their order."""
    seen: dict[tuple[str, str | None, str | None, tuple[str, ...]], int] = {}
    for index, d in enumerate(deviations):
        key = (d.requirement, d.test, d.check, d.brokers)
        if key in seen:
            raise SpecError(f"{where(path, text, ['deviations', index])}: deviations[{index}]: {d.requirement} is "
                            f"listed twice for the same test and brokers (also deviations[{seen[key]}]); merge them")
        seen[key] = index


def profile_for_client(client: str, root: Path | None = None) -> str | None:
    """The bundled profile of a registered client (``stomp.py`` -> ``stomp.py-9.0``), or None.

    When a client has profiles for several versions the newest is the default; ``--profile``
    picks another."""
    matches: list[tuple[tuple[int, ...], str]] = []
    for name in available_client_profiles(root):
        try:
            profile = load_client_profile(name, root=root)
        except SpecError:
            continue  # `ackspec spec validate` reports it; it cannot be anyone's default
        if profile.client == client:
            matches.append((_version_key(profile.version), name))
    return max(matches)[1] if matches else None


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else -1 for part in version.split("."))
