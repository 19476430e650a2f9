"""``ackspec spec``: list, show, validate, coverage and docs of the requirement catalogue, and client-tests.

Exit codes: 0 done; 1 a check found a problem (``coverage`` with a testable MUST/MUST-NOT the suite
does not test, a test citing an unknown ID, or with ``--strict`` any reported requirement uncovered;
``docs --check`` or ``client-tests --check`` with a stale file); 2 bad input (malformed or inconsistent
YAML, unknown ID or family, bad arguments), always as one line on stderr.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from ackspec.errors import AckspecError
from ackspec.spec import Catalogue, Level, Requirement, Role, load_catalogue, load_profile
from ackspec.spec.citations import default_scan_paths, project_test_paths, scan
from ackspec.spec.client_profiles import available_client_profiles, load_client_profile
from ackspec.spec.data import CLIENTS_DIR, TARGETS_DIR
from ackspec.spec.markdown import render
from ackspec.spec.model import PROTOCOLS, Technique
from ackspec.spec.profiles import available_profiles

LEVELS = [level.value for level in Level]
DEFAULT_DOCS = Path("docs") / "catalogue.md"
DEFAULT_CLIENT_DOC = Path("docs") / "client-conformance.md"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("spec", help="the requirement catalogue: list, show, validate, coverage, docs",
                                   description=__doc__.splitlines()[0] if __doc__ else None)
    parser.set_defaults(func=lambda args: _usage(parser))
    root = argparse.ArgumentParser(add_help=False)
    root.add_argument("--root", type=Path, default=None, metavar="DIR",
                      help="catalogue directory (default: the checkout's or bundled spec/catalogue)")
    sub = parser.add_subparsers(dest="spec_command", metavar="SUBCOMMAND", parser_class=type(parser))

    p = sub.add_parser("list", parents=[root], help="list requirements, optionally filtered")
    p.add_argument("--family", metavar="F", help="only this family (e.g. jms-send-async)")
    p.add_argument("--level", type=str.upper, choices=LEVELS, metavar="L", help=f"only this level: {', '.join(LEVELS)}")
    p.add_argument("--role", type=str.lower, choices=[r.value for r in Role], metavar="R",
                   help="only this role: broker, client, both, application")
    p.add_argument("--protocol", type=str.lower, choices=list(PROTOCOLS), metavar="P",
                   help="only requirements checkable over this protocol: stomp, amqp, jms")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", parents=[root], help="show one requirement in full")
    p.add_argument("id", metavar="ID")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("validate", parents=[root], help="validate the catalogue, the target and the client profiles")
    p.add_argument("--targets", type=Path, default=None, metavar="DIR",
                   help="profiles directory (default: the checkout's or bundled spec/targets)")
    p.add_argument("--clients", type=Path, default=None, metavar="DIR",
                   help="client profiles directory (default: the checkout's or bundled spec/clients, unless --root)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("coverage", parents=[root],
                       help="requirements the installed suite does not test (exit 1 if a testable MUST is one)")
    p.add_argument("--level", type=str.upper, choices=LEVELS, metavar="L", action="append",
                   help="levels to report (repeatable; default MUST and MUST-NOT)")
    p.add_argument("--scan", type=Path, action="append", metavar="PATH",
                   help="files or folders to scan instead (repeatable; default: the installed suite)")
    p.add_argument("--include-project-tests", action="store_true",
                   help="also count the source checkout's tests/ (they run against the reference broker only)")
    p.add_argument("--pending", action="append", default=[], metavar="ID",
                   help="a testable MUST whose tests another piece of work owns (repeatable, glob): reported, "
                        "not failing; once cited it must be removed from the list (a covered pending ID fails)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--strict", action="store_true",
                   help="also exit 1 when a requirement of a reported level below MUST is uncovered, or a "
                        "property/stateful requirement has no hypothesis test")
    p.set_defaults(func=cmd_coverage)

    p = sub.add_parser("docs", parents=[root], help="generate the Markdown catalogue")
    p.add_argument("--out", type=Path, default=DEFAULT_DOCS, metavar="FILE",
                   help=f"output file (default {DEFAULT_DOCS}; '-' for stdout)")
    p.add_argument("--check", action="store_true", help="do not write; exit 1 if FILE differs from the catalogue")
    p.set_defaults(func=cmd_docs)

    p = sub.add_parser("client-tests", help="the client-side suite's tests and their requirements, in the docs")
    p.add_argument("--out", type=Path, default=DEFAULT_CLIENT_DOC, metavar="FILE",
                   help=f"document whose generated section is rewritten (default {DEFAULT_CLIENT_DOC})")
    p.add_argument("--check", action="store_true", help="do not write; exit 1 if the section is stale")
    p.set_defaults(func=cmd_client_tests)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _as_dict(req: Requirement) -> dict[str, Any]:
    return {
        "id": req.id, "title": req.title, "rule": req.rule, "level": str(req.level), "family": req.family,
        "source": {k: v for k, v in (("document", req.source.document), ("section", req.source.section),
                                     ("url", req.source.url), ("seed", req.source.seed)) if v is not None},
        "role": str(req.role), "protocols": list(req.protocols), "testable": req.testable,
        "untestable_reason": req.untestable_reason, "capabilities": list(req.capabilities),
        "technique": str(req.technique), "tck": req.tck, "notes": req.notes,
        "parameters": {name: {"type": p.type, "default": p.default,
                              "domain": list(p.domain) if isinstance(p.domain, tuple) else p.domain,
                              "unit": p.unit, "description": p.description}
                       for name, p in req.parameters.items()},
    }


def cmd_list(args: argparse.Namespace) -> int:
    catalogue = load_catalogue(args.root)
    reqs = catalogue.select(family=args.family, level=args.level, role=args.role, protocol=args.protocol)
    if args.json:
        print(json.dumps([_as_dict(r) for r in reqs], indent=2, ensure_ascii=False))
        return 0
    width = max((len(r.id) for r in reqs), default=2)
    for req in reqs:
        print(f"{req.id:<{width}}  {req.level!s:<10}  {req.role!s:<11}  {','.join(req.protocols):<15}  {req.title}")
    print(f"{len(reqs)} of {len(catalogue)} requirements", file=sys.stderr)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    req = load_catalogue(args.root).get(args.id)
    if args.json:
        print(json.dumps(_as_dict(req), indent=2, ensure_ascii=False))
        return 0
    out = [f"{req.id}: {req.title}", "", f"  {req.rule}", "",
           f"level:      {req.level}", f"family:     {req.family}", f"role:       {req.role}",
           f"protocols:  {', '.join(req.protocols)}", f"technique:  {req.technique}",
           f"source:     {req.source}" + (f" <{req.source.url}>" if req.source.url else "")]
    if req.tck:
        out.append(f"tck:        {req.tck}")
    out.append("testable:   " + ("yes" if req.testable else f"no ({req.untestable_reason})"))
    out.append(f"needs:      {', '.join(req.capabilities) or '-'}")
    if req.notes:
        out.append(f"notes:      {req.notes}")
    for name, p in req.parameters.items():
        domain = ", ".join(map(str, p.domain)) if isinstance(p.domain, tuple) else p.domain
        out.append(f"parameter:  {name} ({p.type}{', ' + p.unit if p.unit else ''}) default={p.default!r}"
                   f"{f' domain={domain}' if domain is not None else ''}: {p.description}")
    print("\n".join(out))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    catalogue = load_catalogue(args.root)
    folder = args.targets or TARGETS_DIR
    names = available_profiles(folder)
    deviations = 0
    for name in names:
        profile = load_profile(folder / f"{name}.yaml", catalogue_root=args.root)
        deviations += sum(len(found) for found in profile.deviations.values())
    clients = args.clients or (CLIENTS_DIR if args.root is None else None)  # theirs cite the bundled catalogue
    client_names = available_client_profiles(clients) if clients is not None else []
    client_deviations = sum(len(load_client_profile(clients / f"{name}.yaml", catalogue_root=args.root).deviations)
                            for name in client_names if clients is not None)
    print(f"ok: {len(catalogue)} requirements in {len(catalogue.families)} families; "
          f"{len(names)} target profiles with {deviations} deviations; "
          f"{len(client_names)} client profiles with {client_deviations} deviations")
    return 0


def coverage_report(catalogue: Catalogue, levels: list[str], paths: list[Path],
                    pending: list[str] | None = None) -> dict[str, Any]:
    """Which requirements at ``levels`` are cited, which are not, and which cited IDs are unknown.

    ``technique_not_honoured`` lists the testable requirements (any level) whose ``technique`` is
    property or stateful that no hypothesis test cites: their rule holds over a domain or a sequence
    of operations, which one example does not check. ``gate`` lists the uncovered testable
    MUST/MUST-NOT requirements (whatever ``levels`` shows) that are not ``pending``;
    ``stale_pending`` the pending patterns that match no uncovered MUST any more.
    """
    cited: dict[str, list[str]] = defaultdict(list)
    by_hypothesis: set[str] = set()
    base = Path.cwd()
    for citation in scan(paths):
        cited[citation.requirement].append(citation.where(base))
        if citation.hypothesis:
            by_hypothesis.add(citation.requirement)
    wanted = [r for r in catalogue if str(r.level) in levels]
    testable = [r for r in wanted if r.testable]
    must = [r.id for r in catalogue if r.normative and r.testable and r.id not in cited]
    patterns = pending or []
    waiting = [rid for rid in must if any(fnmatch.fnmatchcase(rid, p) for p in patterns)]
    return {
        "levels": levels,
        "scanned": [str(p) for p in paths],
        "requirements": len(wanted),
        "testable": len(testable),
        "covered": {r.id: cited[r.id] for r in testable if r.id in cited},
        "uncovered": [r.id for r in testable if r.id not in cited],
        "untestable": [r.id for r in wanted if not r.testable],
        "unknown_citations": {rid: where for rid, where in sorted(cited.items()) if rid not in catalogue},
        "pending": waiting,
        "stale_pending": [p for p in patterns if not any(fnmatch.fnmatchcase(rid, p) for rid in must)],
        "gate": [rid for rid in must if rid not in waiting],
        "technique_not_honoured": [r.id for r in catalogue if r.testable and r.id not in by_hypothesis
                                   and r.technique in (Technique.PROPERTY, Technique.STATEFUL)],
    }


def cmd_coverage(args: argparse.Namespace) -> int:
    catalogue = load_catalogue(args.root)
    levels = args.level or ["MUST", "MUST-NOT"]
    paths = args.scan or default_scan_paths(include_project_tests=args.include_project_tests)
    if args.scan and args.include_project_tests:
        paths = paths + project_test_paths()
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise AckspecError(f"spec coverage: --scan path not found: {missing[0]}")
    report = coverage_report(catalogue, levels, paths, args.pending)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_coverage(catalogue, levels, report)
    failed = bool(report["gate"] or report["unknown_citations"] or report["stale_pending"])
    return 1 if failed or (args.strict and (report["uncovered"] or report["technique_not_honoured"])) else 0


def _print_coverage(catalogue: Catalogue, levels: list[str], report: dict[str, Any]) -> None:
    print(f"{'/'.join(levels)}: {len(report['covered'])} of {report['testable']} testable requirements cited "
          f"by a test ({len(report['untestable'])} untestable not counted)")
    if report["uncovered"]:
        print(f"uncovered ({len(report['uncovered'])}):")
        for rid in report["uncovered"]:
            req = catalogue.get(rid)
            mark = "  (pending)" if rid in report["pending"] else ""
            print(f"  {rid:<45}  {req.family:<18}  {req.title}{mark}")
    for rid, where in report["unknown_citations"].items():
        print(f"unknown ID cited: {rid} at {', '.join(where)}")
    for pattern in report["stale_pending"]:
        print(f"pending {pattern} matches no uncovered testable MUST: remove it from --pending")
    if report["technique_not_honoured"]:
        print(f"technique not honoured ({len(report['technique_not_honoured'])}): property/stateful "
              "requirements no hypothesis test cites:")
        for rid in report["technique_not_honoured"]:
            req = catalogue.get(rid)
            print(f"  {rid:<45}  {req.technique!s:<8}  {req.family:<18}  {req.title}")
    if report["gate"]:
        print(f"FAILED: {len(report['gate'])} testable MUST/MUST-NOT requirements are not tested by the suite")


def cmd_docs(args: argparse.Namespace) -> int:
    text = render(load_catalogue(args.root))
    out: Path = args.out
    if str(out) == "-":
        sys.stdout.write(text)
        return 0
    if args.check:
        try:
            current = out.read_text(encoding="utf-8")
        except OSError:
            current = None
        if current != text:
            print(f"ackspec: {out} is out of date with the catalogue; run 'ackspec spec docs --out {out}'",
                  file=sys.stderr)
            return 1
        print(f"{out} is up to date")
        return 0
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8", newline="\n")
    except OSError as exc:
        raise AckspecError(f"spec docs: cannot write {out}: {exc.strerror or exc}") from exc
    print(f"wrote {out} ({text.count(chr(10))} lines)")
    return 0


def cmd_client_tests(args: argparse.Namespace) -> int:
    from ackspec.cli.client_tests_doc import main  # noqa: PLC0415  (imports pytest and the client suite)

    return main(args.out, args.check)
