"""``python -m django_simba.testing.simulation``: run seeds, print a summary, replay one seed.

Exit status: 0 when no invariant was violated, 1 when one was (expected under a
``--premise``), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections import Counter
from collections.abc import Sequence

from .batch import Summary, run_seeds
from .config import HandOver, Premise, SimulationConfig
from .faults import FaultKind
from .network import CALL_EFFECTS
from .world import simulate


def _parser() -> argparse.ArgumentParser:
    defaults = SimulationConfig(seed=0)
    parser = argparse.ArgumentParser(
        prog="python -m django_simba.testing.simulation",
        description="Deterministic simulation of django-simba engines under faults.",
    )
    parser.add_argument("--seed", type=int, help="run this one seed (and print its trace with --trace)")
    parser.add_argument("--seeds", type=int, default=100, help="how many seeds to run (default 100)")
    parser.add_argument("--first", type=int, default=0, help="the first seed of the batch (default 0)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes for a batch (default 1)")
    parser.add_argument("--trace", action="store_true", help="print the trace of the run (with --seed)")
    parser.add_argument(
        "--save-summary",
        metavar="PATH",
        help="also write the batch's summary to PATH (a pickle, read back by the test suite)",
    )
    parser.add_argument("--trace-size", type=int, default=defaults.trace_size, help="events kept in a trace")
    parser.add_argument(
        "--premise",
        action="append",
        default=[],
        choices=[p.value for p in Premise],
        help="inject a fault no client can prevent (repeatable)",
    )
    parser.add_argument(
        "--hand-over",
        choices=[h.value for h in HandOver],
        help="how the model backend ends a term (default: drawn from each seed)",
    )
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        choices=[k.value.replace(" ", "-") for k in FaultKind],
        help="never inject this kind of fault (repeatable)",
    )
    parser.add_argument(
        "--without-redis-rules",
        action="store_true",
        help="the Redis-like model forgets without the scripts' rules (shows what they prevent)",
    )
    parser.add_argument("--processes", type=int, default=defaults.processes)
    parser.add_argument("--names", default=",".join(defaults.names), help="comma-separated election names")
    parser.add_argument(
        "--lock-names", default=",".join(defaults.lock_names), help="comma-separated lock names"
    )
    parser.add_argument("--lease", type=float, default=defaults.lease)
    parser.add_argument("--renew", type=float, default=defaults.renew)
    parser.add_argument("--drift", type=float, default=defaults.drift)
    parser.add_argument("--duration", type=float, default=defaults.duration, help="virtual seconds per seed")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    template = SimulationConfig(
        seed=args.seed if args.seed is not None else args.first,
        processes=args.processes,
        names=tuple(n for n in args.names.split(",") if n),
        lock_names=tuple(n for n in args.lock_names.split(",") if n),
        lease=args.lease,
        renew=args.renew,
        drift=args.drift,
        duration=args.duration,
        premises=frozenset(Premise(p) for p in args.premise),
        hand_over=HandOver(args.hand_over) if args.hand_over else None,
        without=frozenset(kind.replace("-", " ") for kind in args.without),
        redis_rules=not args.without_redis_rules,
        trace_size=args.trace_size,
    )
    if args.seed is not None:
        return _one(template, show_trace=args.trace)
    summary = run_seeds(range(args.first, args.first + args.seeds), template, jobs=args.jobs)
    print(format_summary(summary, template, jobs=args.jobs))
    if args.save_summary:
        with open(args.save_summary, "wb") as file:
            pickle.dump(summary, file)
    return 0 if summary.ok else 1


def _one(config: SimulationConfig, *, show_trace: bool) -> int:
    result = simulate(config)
    if result.ok:
        print(f"seed {config.seed}: no violation ({result.events} events)")
        faults = ", ".join(f"{kind} {count}" for kind, count in sorted(result.faults.items()))
        print(f"faults: {faults or 'none'}")
        for takeover in result.takeovers:
            took = "no take-over" if takeover.seconds is None else f"{takeover.seconds:.3f} s"
            held = "held to the bound" if takeover.checked else "not held to the bound"
            crash = f"{takeover.crashed_at:.3f}"
            print(f"take-over of {takeover.name} after the crash at {crash}: {took} ({held})")
        if show_trace:
            print(f"last {len(result.trace)} events:")
            print("\n".join(f"  {line}" for line in result.trace))
    else:
        print(result.report())
    return 0 if result.ok else 1


def format_summary(summary: Summary, config: SimulationConfig, *, jobs: int = 1) -> str:
    """The summary table a batch prints."""
    premises = ", ".join(sorted(p.value for p in config.premises)) or "none"
    lines = [
        f"seeds run: {summary.seeds} ({summary.events:,} events, {summary.wall:.1f} s wall, {jobs} job(s))",
        f"world: {config.processes} processes, elections {','.join(config.names)}, "
        f"locks {','.join(config.lock_names) or 'none'}, lease {config.lease:g} s, "
        f"renew {config.renew:g} s, DRIFT {config.drift:g}, {config.duration:g} virtual s per seed",
        f"premises: {premises}",
        "",
        f"{'faults injected':<48}{'count':>10}",
    ]
    lines += [f"  {kind:<46}{count:>10,}" for kind, count in sorted(summary.faults.items())]
    lines += ["", *format_call_faults(summary)]
    ways = ", ".join(f"{way} {count}" for way, count in sorted(summary.hand_overs.items()))
    lines += ["", f"runs by how the backend ends a term: {ways or '-'}"]
    lines += ["", f"{'invariant violations':<48}{'count':>10}"]
    lines += [f"  {kind:<46}{count:>10,}" for kind, count in sorted(summary.violations.items())]
    if not summary.violations:
        lines.append("  none")
    lines += [
        "",
        f"take-overs after a leader crashed: {summary.takeovers} "
        f"({summary.takeovers_checked} in calm windows, held to {config.takeover_bound:.3f} s; "
        f"{summary.takeovers_unfinished} cut short by the end of a run)",
        f"  worst in a calm window: {summary.worst_checked_takeover}",
        f"  worst of all:           {summary.worst_takeover}",
        f"recovery after the last fault ({summary.recoveries} runs with a calm tail): "
        f"worst {summary.worst_recovery}, bound {config.settle + config.recovery_bound:.3f} s",
        f"fenced register: {summary.writes_accepted:,} writes accepted, {summary.writes_rejected:,} rejected",
    ]
    if summary.failing_seeds:
        firsts = Counter(summary.first_violation.values())
        lines += ["", f"{'failing seeds by their first violation':<48}{'seeds':>10}"]
        lines += [f"  {kind:<46}{count:>10,}" for kind, count in sorted(firsts.items())]
        shown = ", ".join(str(s) for s in summary.failing_seeds[:20])
        more = f" and {len(summary.failing_seeds) - 20} more" if len(summary.failing_seeds) > 20 else ""
        lines += ["", f"seeds with violations ({len(summary.failing_seeds)}): {shown}{more}", ""]
        lines += summary.reports[:1]
    else:
        lines += ["", "seeds with violations: none"]
    return "\n".join(lines)


#: Column headings of the call-fault table, one per effect, in CALL_EFFECTS order.
_EFFECT_HEADINGS = (
    "lost req",
    "lost rep",
    "reset bef",
    "reset aft",
    "late appl",
    "late ans",
    "slow",
    "refused",
)


def format_call_faults(summary: Summary) -> list[str]:
    """Which faults hit which backend operation: every call of the SPI is exposed to every fault."""
    operations = sorted({operation for operation, _ in summary.call_faults})
    width = max((len(o) for o in operations), default=10) + 2
    lines = ["faults by backend operation (calls hit)"]
    lines.append(" " * width + "".join(f"{h:>10}" for h in _EFFECT_HEADINGS))
    for operation in operations:
        counts = "".join(f"{summary.call_faults[(operation, effect)]:>10,}" for effect in CALL_EFFECTS)
        lines.append(f"  {operation:<{width - 2}}{counts}")
    return lines


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
