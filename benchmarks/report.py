"""The tables of a run, with the targets of issue 8 checked as PASS / FAIL columns.

Targets (never timed assertions in tests, only columns here):

* uncontended acquire + release within 1.5x of the raw floor (p50), and faster
  (p50) than every peer on the same backend; library peers and the servers'
  native session locks are checked in separate columns;
* keep-alive: the same number of round trips whatever the number of leases;
* take-over after a clean stand-down under 50 ms where the backend notifies
  (Redis, ZooKeeper, PostgreSQL, memory), within renew/2 + jitter (renew/4)
  where it polls (MySQL, SQLite); after SIGKILL within lease + renew/2 + jitter;
* contention: hand-offs/s at least those of the fairest peer on the backend, no
  process starved (each gets at least 10 % of a fair share), no overlap.
* async (N coroutines of one process on ``alock``, beside N threads on ``lock()``):
  the process's thread count the same whatever N (within ``THREADS_SLACK``), the
  coroutines' hand-off p50 within 1.5x of the threads' at the same N, no waiter
  starved (least / most acquisitions at least 0.5), no overlap.
* parallel names (N threads of one process, each on a name of its own): no error at
  any N, and at least ``PARALLEL_SHARE`` of the cycles/s of N raw clients;
* client CPU per uncontended cycle within ``CPU_FACTOR`` of the raw client's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .scenarios.common import Outcome
from .targets import FLOOR, NATIVE, PEER, SIMBA, SPI, TARGETS, Target

FLOOR_FACTOR = 1.5
NOTIFYING = ("memory", "redis", "zookeeper", "postgresql")
CLEAN_NOTIFIED_MS = 50.0
STARVED_SHARE = 0.10
#: async: coroutines' hand-off p50 at most this times the threads'; least / most at least this.
ASYNC_HANDOFF_FACTOR = 1.5
ASYNC_FAIRNESS = 0.5
#: parallel names: the engine's cycles/s at least this share of N raw clients'.
PARALLEL_SHARE = 0.70
#: client CPU per cycle: the engine's at most this times the raw client's.
CPU_FACTOR = 1.5
#: async: how far the peak thread count of coroutine rows may spread across N (a helper thread
#: of the engine, say, started by one row and not another).
THREADS_SLACK = 2

_BY_KEY = {target.key: target for target in TARGETS}


def target_of(outcome: Outcome) -> Target:
    return _BY_KEY[outcome.target]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"

    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def _num(value: Any, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def _family_rows(outcomes: list[Outcome], family: str, roles: tuple[str, ...]) -> list[Outcome]:
    return [
        o for o in outcomes if not o.error and target_of(o).family == family and target_of(o).role in roles
    ]


# -- uncontended -------------------------------------------------------------------------


def uncontended_checks(outcomes: list[Outcome]) -> dict[str, dict[str, Any]]:
    checks: dict[str, dict[str, Any]] = {}
    for outcome in outcomes:
        target = target_of(outcome)
        if target.role != SIMBA or outcome.error:
            continue
        p50 = outcome.values["p50_us"]
        found: dict[str, Any] = {}
        floors = _family_rows(outcomes, target.family, (FLOOR,))
        if floors:
            ratio = p50 / floors[0].values["p50_us"]
            found["floor"] = {"ratio": ratio, "ok": ratio <= FLOOR_FACTOR, "floor": floors[0].target}
        for role, label in ((PEER, "peers"), (NATIVE, "native")):
            rivals = _family_rows(outcomes, target.family, (role,))
            if rivals:
                fastest = min(rivals, key=lambda o: o.values["p50_us"])
                found[label] = {
                    "ok": p50 < fastest.values["p50_us"],
                    "fastest": fastest.target,
                    "ratio": p50 / fastest.values["p50_us"],
                }
        checks[outcome.target] = found
    return checks


def _check_cell(check: dict[str, Any] | None, show: str) -> str:
    if not check:
        return ""
    rival = check.get("fastest", check.get("floor", "")).split("/", 1)[-1]
    detail = f"{check['ratio']:.2f}x" if show == "floor" else f"{check['ratio']:.2f}x {rival}"
    return f"{verdict(check['ok'])} {detail}"


def uncontended_table(outcomes: list[Outcome]) -> str:
    checks = uncontended_checks(outcomes)
    rows = []
    for outcome in outcomes:
        target = target_of(outcome)
        if outcome.error:
            rows.append([target.family, target.subject, "error", "", "", "", "", "", ""])
            continue
        v = outcome.values
        rt = _num(v.get("rt"), 1) if target.family not in ("sqlite", "memory") else "-"
        if v.get("connects"):
            rt += f" +{v['connects']:.1f} conn"
        check = checks.get(outcome.target, {})
        rows.append(
            [
                target.family,
                target.subject,
                _num(v["p50_us"]),
                _num(v["p99_us"]),
                _num(v["ops"]),
                rt,
                _check_cell(check.get("floor"), "floor"),
                _check_cell(check.get("peers"), "peer"),
                _check_cell(check.get("native"), "peer"),
            ]
        )
    return table(
        ["backend", "target", "p50 µs", "p99 µs", "ops/s", "req/cycle", "≤1.5x floor", "< peers", "< native"],
        rows,
    )


# -- contended ---------------------------------------------------------------------------


def contended_checks(outcomes: list[Outcome]) -> dict[str, dict[str, Any]]:
    checks: dict[str, dict[str, Any]] = {}
    for outcome in outcomes:
        target = target_of(outcome)
        if outcome.error:
            continue
        v = outcome.values
        found: dict[str, Any] = {"exclusive": {"ok": v["overlaps"] == 0}}
        if target.role == SIMBA:
            fair_share = sum(r["acq_per_s"] for r in v["rounds"]) / len(v["rounds"]) * v["seconds"] / 4
            found["starvation"] = {"ok": v["min"] >= STARVED_SHARE * fair_share, "min": v["min"]}
            rivals = _family_rows(outcomes, target.family, (PEER, NATIVE))
            if rivals:
                fairest = max(rivals, key=lambda o: (o.values["fairness"], o.values["handoffs_per_s"]))
                found["handoffs"] = {
                    "ok": v["handoffs_per_s"] >= fairest.values["handoffs_per_s"],
                    "fairest": fairest.target,
                    "theirs": fairest.values["handoffs_per_s"],
                }
        checks[outcome.target] = found
    return checks


def _handoffs_cell(check: dict[str, Any] | None) -> str:
    if not check:
        return ""
    rival = check["fairest"].split("/", 1)[1]
    return f"{verdict(check['ok'])} vs {rival} {check['theirs']:,.0f}"


def contended_table(outcomes: list[Outcome]) -> str:
    checks = contended_checks(outcomes)
    rows = []
    for outcome in outcomes:
        target = target_of(outcome)
        if outcome.error:
            rows.append([target.family, target.subject, "error", "", "", "", "", "", ""])
            continue
        v, check = outcome.values, checks.get(outcome.target, {})
        handoffs = check.get("handoffs")
        rows.append(
            [
                target.family,
                target.subject,
                _num(v["acq_per_s"]),
                _num(v["handoffs_per_s"]),
                f"{_num(v['min'])} / {_num(v['max'])}",
                f"{v['fairness']:.2f}",
                f"{v['overlaps']} {verdict(check['exclusive']['ok'])}",
                _handoffs_cell(handoffs),
                verdict(check["starvation"]["ok"]) if "starvation" in check else "",
            ]
        )
    return table(
        [
            "backend",
            "target",
            "acq/s",
            "handoffs/s",
            "min / max per proc",
            "min/max",
            "overlaps",
            "≥ fairest peer's handoffs",
            "none starved",
        ],
        rows,
    )


# -- keep-alive --------------------------------------------------------------------------


def keepalive_checks(outcomes: list[Outcome]) -> dict[str, dict[str, Any]]:
    checks = {}
    for outcome in outcomes:
        if target_of(outcome).role == SIMBA and not outcome.error:
            trips = {step["rt"] for step in outcome.values["steps"]}
            checks[outcome.target] = {"ok": len(trips) == 1, "round_trips": sorted(trips)}
    return checks


def keepalive_table(outcomes: list[Outcome], counts: Sequence[int]) -> str:
    checks = keepalive_checks(outcomes)
    rows = []
    for outcome in outcomes:
        target = target_of(outcome)
        if outcome.error:
            rows.append([target.family, target.subject, "error", *[""] * len(counts)])
            continue
        by_count = {step["leases"]: step for step in outcome.values["steps"]}
        cells = []
        for count in counts:
            step = by_count.get(count)
            if step is None:
                cells.append("-")
                continue
            rt = "-" if target.family == "sqlite" else str(step["rt"])
            packets = f" ({step['server_packets']} pkts)" if "server_packets" in step else ""
            cells.append(f"{step['ms']:.2f} ms / {rt} req{packets}")
        check = checks.get(outcome.target)
        rows.append([target.family, target.subject, *cells, verdict(check["ok"]) if check else ""])
    return table(["backend", "target", *[f"{c:,} leases" for c in counts], "constant req"], rows)


# -- take-over ---------------------------------------------------------------------------


def takeover_limits(family: str, ttl: float) -> tuple[float, float]:
    """(clean, kill) limits in ms for a lease of ``ttl`` renewed every ttl/3."""
    renew = ttl / 3
    jitter = renew / 4
    clean = CLEAN_NOTIFIED_MS if family in NOTIFYING else (renew / 2 + jitter) * 1000
    return clean, (ttl + renew / 2 + jitter) * 1000


def takeover_checks(outcomes: list[Outcome]) -> dict[str, dict[str, Any]]:
    checks = {}
    for outcome in outcomes:
        target = target_of(outcome)
        if target.role != SIMBA:
            continue
        clean_limit, kill_limit = takeover_limits(target.family, outcome.values["ttl"])
        found = {}
        for kind, limit in (("clean", clean_limit), ("kill", kill_limit)):
            trials = outcome.values.get(f"{kind}_ms") or []
            if trials:
                found[kind] = {"ok": max(trials) <= limit and not outcome.error, "limit_ms": limit}
            elif outcome.error and kind in outcome.error.split(":", 1)[0]:
                found[kind] = {"ok": False, "limit_ms": limit}
        checks[outcome.target] = found
    return checks


def takeover_table(outcomes: list[Outcome]) -> str:
    checks = takeover_checks(outcomes)
    rows = []
    for outcome in outcomes:
        target = target_of(outcome)
        v, check = outcome.values, checks.get(outcome.target, {})
        cells = [target.family, target.subject]
        for kind in ("clean", "kill"):
            trials = v.get(f"{kind}_ms") or []
            cells.append(
                f"{v[f'{kind}_median_ms']:,.1f} ({min(trials):,.1f}-{max(trials):,.1f})" if trials else "-"
            )
            if kind in check:
                cells.append(f"{verdict(check[kind]['ok'])} ≤ {check[kind]['limit_ms']:,.0f}")
            else:
                cells.append("")
        if outcome.error:
            cells[-1] = (cells[-1] + " error").strip()
        rows.append(cells)
    return table(
        [
            "backend",
            "target",
            "clean ms median (min-max)",
            "clean target",
            "SIGKILL ms median (min-max)",
            "kill target",
        ],
        rows,
    )


# -- memory ------------------------------------------------------------------------------


def memory_table(outcomes: list[Outcome]) -> str:
    rows = []
    for outcome in outcomes:
        target = target_of(outcome)
        if outcome.error:
            rows.append([target.family, target.subject, "error", "", "", ""])
            continue
        v = outcome.values
        rows.append(
            [
                target.family,
                target.subject,
                f"{v['held']:,}",
                f"{v['rss_delta_mib']:.1f}",
                f"{v['bytes_per_lease']:,.0f}",
                f"{v['acquire_all_s']:.2f}",
            ]
        )
    return table(["backend", "target", "leases held", "RSS delta MiB", "bytes/lease", "acquire all s"], rows)


# -- async -------------------------------------------------------------------------------


def _async_rows(outcome: Outcome, mode: str) -> dict[int, dict[str, Any]]:
    return {row["n"]: row for row in outcome.values.get("rows", []) if row["mode"] == mode}


def async_checks(outcomes: list[Outcome]) -> dict[str, dict[str, Any]]:
    checks: dict[str, dict[str, Any]] = {}
    for outcome in outcomes:
        if outcome.error:
            continue
        coroutines, threads = _async_rows(outcome, "async"), _async_rows(outcome, "threads")
        peaks = [row["threads_peak"] for row in coroutines.values()]
        found: dict[str, Any] = {
            "threads": {"ok": bool(peaks) and max(peaks) - min(peaks) <= THREADS_SLACK, "peaks": peaks},
            "exclusive": {"ok": all(r["overlaps"] == 0 for r in [*coroutines.values(), *threads.values()])},
        }
        for n, row in coroutines.items():
            theirs = threads.get(n)
            handoff: dict[str, Any] | None = None
            if theirs is not None and not math.isnan(theirs["handoff_p50_us"]):
                ratio = row["handoff_p50_us"] / theirs["handoff_p50_us"]
                handoff = {"ok": ratio <= ASYNC_HANDOFF_FACTOR, "ratio": ratio}
            found[f"n={n}"] = {
                "handoff": handoff,
                "starvation": {"ok": row["fairness"] >= ASYNC_FAIRNESS, "fairness": row["fairness"]},
            }
        checks[outcome.target] = found
    return checks


def async_table(outcomes: list[Outcome]) -> str:
    checks = async_checks(outcomes)
    rows = []
    for outcome in outcomes:
        target = target_of(outcome)
        if outcome.error:
            rows.append([target.family, "error", *[""] * 10])
            continue
        check = checks[outcome.target]
        counts = sorted({row["n"] for row in outcome.values["rows"]})
        for n in counts:
            for mode in ("async", "threads"):
                row = _async_rows(outcome, mode).get(n)
                if row is None:
                    rows.append([target.family, mode, f"{n:,}", "failed", *[""] * 8])
                    continue
                cut = " (budget)" if row["cut_by_budget"] else ""
                cells = [
                    target.family,
                    "alock" if mode == "async" else "lock() threads",
                    f"{n:,}",
                    f"{row['acquisitions']:,}{cut}",
                    f"{row['total_s']:.2f}",
                    f"{_num(row['handoff_p50_us'])} / {_num(row['handoff_p99_us'])}",
                    f"{row['threads_before']} -> {row['threads_peak']}",
                    f"{row['least']} / {row['most']} = {row['fairness']:.2f}",
                    str(row["overlaps"]),
                ]
                if mode == "async":
                    per_n = check[f"n={n}"]
                    handoff = per_n["handoff"]
                    cells += [
                        f"{verdict(handoff['ok'])} {handoff['ratio']:.2f}x" if handoff else "",
                        verdict(per_n["starvation"]["ok"]),
                        verdict(check["threads"]["ok"]) if n == counts[0] else "",
                    ]
                else:
                    cells += ["", "", ""]
                rows.append(cells)
    return table(
        [
            "backend",
            "contenders",
            "N",
            "acquisitions",
            "total s",
            "hand-off p50 / p99 µs",
            "threads before -> waiting",
            "least / most",
            "overlaps",
            "≤1.5x threads' p50",
            "none starved",
            "threads same for every N",
        ],
        rows,
    )


# -- parallel names and CPU ----------------------------------------------------------------


def _parallel_rows(outcome: Outcome, subject: str) -> dict[int, dict[str, Any]]:
    return {row["n"]: row for row in outcome.values.get("rows", []) if row["subject"] == subject}


def parallel_checks(outcomes: list[Outcome]) -> dict[str, dict[str, Any]]:
    from .scenarios.parallel import ENGINE, RAW

    checks: dict[str, dict[str, Any]] = {}
    for outcome in outcomes:
        if outcome.error:
            continue
        ours, raw = _parallel_rows(outcome, ENGINE), _parallel_rows(outcome, RAW)
        found: dict[str, Any] = {}
        for n, row in ours.items():
            theirs = raw.get(n)
            share = row["ops"] / theirs["ops"] if theirs and theirs["ops"] else None
            found[f"n={n}"] = {
                "no_error": {"ok": row["errors"] == 0, "errors": row["errors"]},
                "share": None if share is None else {"ok": share >= PARALLEL_SHARE, "ratio": share},
            }
        checks[outcome.target] = found
    return checks


def parallel_table(outcomes: list[Outcome]) -> str:
    from .scenarios.parallel import ENGINE, ENGINE_POOL, RAW

    checks = parallel_checks(outcomes)
    rows = []
    for outcome in outcomes:
        target = target_of(outcome)
        if outcome.error:
            rows.append([target.family, "error", *[""] * 8])
            continue
        ours, pooled, raw = (_parallel_rows(outcome, s) for s in (ENGINE, ENGINE_POOL, RAW))
        for n in sorted(ours):
            row, check = ours[n], checks[outcome.target][f"n={n}"]
            share = check["share"]
            rows.append(
                [
                    target.family,
                    f"{n:,}",
                    f"{_num(row['ops'])} ({_num(row['cpu_us'])})",
                    str(row["errors"]),
                    f"{_num(pooled[n]['ops'])} ({pooled[n]['errors']})" if n in pooled else "-",
                    f"{_num(raw[n]['ops'])} ({_num(raw[n]['cpu_us'])})" if n in raw else "-",
                    str(raw[n]["errors"]) if n in raw else "-",
                    f"{verdict(share['ok'])} {share['ratio']:.0%}" if share else "",
                    verdict(check["no_error"]["ok"]),
                ]
            )
    return table(
        [
            "backend",
            "N",
            "django-simba cycles/s (CPU µs/cycle)",
            "errors",
            "pool = N: cycles/s (errors)",
            "raw cycles/s (CPU µs/cycle)",
            "raw errors",
            f"≥{PARALLEL_SHARE:.0%} raw",
            "no error",
        ],
        rows,
    )


def cpu_checks(outcomes: list[Outcome]) -> dict[str, dict[str, Any]]:
    checks: dict[str, dict[str, Any]] = {}
    for outcome in outcomes:
        if outcome.error:
            continue
        measured = outcome.values["subjects"]
        floor = next((key for key in measured if _BY_KEY[key].role == FLOOR), None)
        if floor is None:
            continue
        ratio = measured[outcome.target]["cpu_us"] / measured[floor]["cpu_us"]
        checks[outcome.target] = {"ok": ratio <= CPU_FACTOR, "ratio": ratio, "floor": floor}
    return checks


def cpu_table(outcomes: list[Outcome]) -> str:
    checks = cpu_checks(outcomes)
    rows = []
    for outcome in outcomes:
        target = target_of(outcome)
        if outcome.error:
            rows.append([target.family, "error", "", "", "", ""])
            continue
        measured = outcome.values["subjects"]
        by_role = {_BY_KEY[key].role: value["cpu_us"] for key, value in measured.items()}
        check = checks.get(outcome.target)
        rows.append(
            [
                target.family,
                _num(by_role.get(SIMBA)),
                _num(by_role.get(SPI)),
                _num(by_role.get(FLOOR)),
                f"{check['ratio']:.2f}x" if check else "-",
                verdict(check["ok"]) if check else "",
            ]
        )
    return table(
        ["backend", "django-simba µs", "SPI alone µs", "raw client µs", "engine / raw", f"≤{CPU_FACTOR}x"],
        rows,
    )


def _parallel_title(settings: dict[str, Any]) -> str:
    seconds, ttl = settings.get("parallel_seconds"), settings.get("parallel_ttl")
    rounds = settings.get("contention_rounds")
    return (
        f"N threads of one process, each cycling a name of its own, for {seconds} s (lease {ttl} s,"
        f" renewed every third), beside N raw clients on a connection each; median of {rounds} rounds,"
        " errors summed"
    )


def render(results: dict[str, list[Outcome]], meta: dict[str, Any]) -> str:
    parts = [f"django-simba benchmarks ({meta['profile']}): {meta['command']}", ""]
    settings = meta.get("settings", {})
    sections = [
        (
            "uncontended",
            "Uncontended acquire + release (median of rounds; req: client requests, +conn: new connections)",
            uncontended_table,
        ),
        ("contended", f"{4} processes contending one name", contended_table),
        ("keepalive", "Keep-alive of one session holding N leases (median time / client requests)", None),
        ("takeover", "Take-over by a waiting candidate (lease = ttl, renew = ttl/3)", takeover_table),
        ("memory", "Memory of one process holding many leases", memory_table),
        (
            "async",
            "N coroutines on alock() beside N threads on lock(), one process, one name (a run stops "
            f"after max({settings.get('async_per_waiter')} x N, {settings.get('async_min_acquisitions')}) "
            f"acquisitions in all, or after {settings.get('async_budget')} s: '(budget)'; median of "
            f"{settings.get('contention_rounds')} rounds; with N = 1 a hand-off is the contender's own "
            "release -> next acquisition)",
            async_table,
        ),
        ("parallel", _parallel_title(settings), parallel_table),
        (
            "cpu",
            "Client CPU per uncontended acquire + release (time.process_time over every thread of one"
            f" process; blocks of {settings.get('cpu_block_cycles')} cycles alternating; median block)",
            cpu_table,
        ),
    ]
    for key, title, render_table in sections:
        if key not in results:
            continue
        parts.append(f"## {title}")
        if key == "keepalive":
            parts.append(keepalive_table(results[key], meta["keepalive_counts"]))
        else:
            assert render_table is not None
            parts.append(render_table(results[key]))
        for outcome in results[key]:
            if outcome.error:
                parts.append(f"  ! {outcome.target}: {outcome.error.strip().splitlines()[-1][:300]}")
            failed = outcome.values.get("failures") or []
            if failed:
                kept = len(outcome.values.get("rounds", []))
                last = failed[-1].strip().splitlines()[-1][:240]
                parts.append(
                    f"  ! {outcome.target}: {len(failed)} of {len(failed) + kept} rounds failed ({last})"
                )
        parts.append("")
    if meta.get("unusable"):
        parts.append("Not measured: " + "; ".join(f"{k}: {v}" for k, v in meta["unusable"].items()))
    return "\n".join(parts)


def all_checks(results: dict[str, list[Outcome]]) -> dict[str, Any]:
    return {
        "uncontended": uncontended_checks(results.get("uncontended", [])),
        "contended": contended_checks(results.get("contended", [])),
        "keepalive": keepalive_checks(results.get("keepalive", [])),
        "takeover": takeover_checks(results.get("takeover", [])),
        "async": async_checks(results.get("async", [])),
        "parallel": parallel_checks(results.get("parallel", [])),
        "cpu": cpu_checks(results.get("cpu", [])),
    }
