"""Citing requirements from tests: one marker, checked at collection, labelled for allure.

    from ackspec.conformance.markers import requirement

    @requirement("JMS-7.3.8-CALLBACK-ORDER", "JMS-7.3.3-ORDER-MIXED-SYNC-ASYNC")
    def test_callbacks_follow_send_order(...): ...

``requirement`` is ``pytest.mark.requirement``. This module is a pytest plugin (loaded by
:mod:`ackspec.conformance.plugin`): it registers the marker, fails collection with one line naming
the test and the ID when a test cites an ID the catalogue does not have, records the citations in
``item.user_properties`` (so JUnit XML carries them), and, when allure-pytest is loaded, adds the
labels epic = source document, feature = family, story = requirement ID, tag = level, plus a link to
the source. ``ackspec spec coverage`` finds the same citations statically (see
:mod:`ackspec.spec.citations`).
"""

from __future__ import annotations

import pytest

from ackspec.spec import load_catalogue
from ackspec.spec.errors import UnknownRequirement
from ackspec.spec.model import Requirement

requirement = pytest.mark.requirement
"""``@requirement("ID", ...)``: the requirements a test checks."""

MARKER_HELP = "requirement(*ids): requirement IDs of the ackspec catalogue this test checks"
ALLURE_PLUGIN_NAMES = ("allure_pytest", "allure-pytest")


def cited_ids(item: pytest.Item) -> list[str]:
    """The IDs an item cites, in order, without repeats (markers on the function, class and module)."""
    ids: list[str] = []
    for marker in item.iter_markers("requirement"):
        for arg in marker.args:
            group = [arg] if isinstance(arg, str) else list(arg) if isinstance(arg, list | tuple) else [arg]
            for rid in group:
                if not isinstance(rid, str) or not rid:
                    raise pytest.UsageError(f"{item.nodeid}: requirement marker takes ID strings, got {rid!r}")
                if rid not in ids:
                    ids.append(rid)
    return ids


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    citing = [(item, ids) for item in items if (ids := cited_ids(item))]
    if not citing:
        return
    catalogue = load_catalogue()
    allure = _allure_active(config)
    for item, ids in citing:
        for rid in ids:
            if rid not in catalogue:
                raise pytest.UsageError(f"{item.nodeid}: {UnknownRequirement(rid, catalogue.ids)}")
        _label(item, [catalogue.get(rid) for rid in ids], allure)


def _allure_active(config: pytest.Config) -> bool:
    return any(config.pluginmanager.has_plugin(name) for name in ALLURE_PLUGIN_NAMES)


def _label(item: pytest.Item, requirements: list[Requirement], allure: bool) -> None:
    for req in requirements:
        item.user_properties.append(("requirement", req.id))
        item.user_properties.append((f"requirement.{req.id}.level", str(req.level)))
    if not allure:
        return
    for req in requirements:
        item.add_marker(pytest.mark.allure_label(req.source.document, label_type="epic"))
        item.add_marker(pytest.mark.allure_label(req.family, label_type="feature"))
        item.add_marker(pytest.mark.allure_label(req.id, label_type="story"))
        item.add_marker(pytest.mark.allure_label(str(req.level), label_type="tag"))
        if req.source.url:
            item.add_marker(pytest.mark.allure_link(req.source.url, link_type="link",
                                                    name=f"{req.source.document} {req.source.section}"))

