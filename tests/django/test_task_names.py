"""@singleton_task names made from each call's arguments: one lock per invoice, checked at import."""

from __future__ import annotations

import asyncio
import hashlib
import threading

import pytest

from django_simba import InvalidName, registry, singleton_task
from django_simba.decorators import Skipped, current_term
from tests.django.engines import MEMORY_SIMBA, fresh_engine_on, hold_elsewhere

fresh_engine = fresh_engine_on(MEMORY_SIMBA)


# -- filled from the call --------------------------------------------------------------------------


def test_a_template_is_filled_by_parameter_name_positional_keyword_or_default():
    @singleton_task("invoice:{invoice_id}:{kind}", mode="lock")
    def send(invoice_id, kind="pdf"):
        return current_term().name

    assert send(7) == "invoice:7:pdf"
    assert send(invoice_id=8) == "invoice:8:pdf"
    assert send(9, kind="xml") == "invoice:9:xml"
    assert send.simba_name == "invoice:{invoice_id}:{kind}"
    assert send.simba_name_for(10) == "invoice:10:pdf"


def test_calls_for_the_same_value_exclude_each_other_and_others_run_at_once():
    inside, leave = threading.Barrier(3), threading.Event()

    @singleton_task("invoice:{invoice_id}", mode="lock")
    def send(invoice_id):
        inside.wait(10)  # broken unless the calls for invoices 1 and 2 are in at the same time
        leave.wait(10)
        return current_term().name

    results: list[object] = []
    threads = [threading.Thread(target=lambda n=n: results.append(send(n))) for n in (1, 2)]
    for thread in threads:
        thread.start()
    inside.wait(10)
    skipped = send(1)
    assert isinstance(skipped, Skipped) and skipped.name == "invoice:1"
    assert skipped.reason == "another instance holds the lock"
    leave.set()
    for thread in threads:
        thread.join(10)
    assert sorted(results) == ["invoice:1", "invoice:2"]  # type: ignore[type-var]


def test_a_skip_says_which_name_and_who_holds_it():
    hold_elsewhere("invoice:42", metadata="host=worker2")

    @singleton_task("invoice:{invoice_id}", mode="lock")
    def send(invoice_id):
        raise AssertionError("must not run")

    skipped = send(42)
    assert skipped.name == "invoice:42" and skipped.holder.metadata == "host=worker2"
    assert "skipped invoice:42" in str(skipped)


def test_an_integer_format_spec_pads_the_value():
    @singleton_task("batch:{n:06d}.{part:x}", mode="lock")
    def run(n, part):
        return current_term().name

    assert run(42, 255) == "batch:000042.ff"


def test_a_coroutine_gets_the_name_of_its_call():
    @singleton_task("report:{report_id}", mode="lock")
    async def rebuild(report_id):
        await asyncio.sleep(0)
        return current_term().name

    async def both():
        return await asyncio.gather(rebuild(1), rebuild(report_id=2))

    assert asyncio.run(both()) == ["report:1", "report:2"]
    hold_elsewhere("report:3")
    skipped = asyncio.run(rebuild(3))
    assert isinstance(skipped, Skipped) and skipped.name == "report:3"


def test_permits_are_per_filled_name():
    @singleton_task("export:{partner}", permits=2)
    def export(partner):
        return current_term().name

    assert export("acme") in ("export:acme:1", "export:acme:2")
    hold_elsewhere("export:globex:1")
    hold_elsewhere("export:globex:2")
    skipped = export("globex")
    assert isinstance(skipped, Skipped) and skipped.name == "export:globex"
    assert skipped.reason == "all 2 permits are held"


def test_a_name_function_makes_names_a_template_cannot():
    def digest(customer, **_):
        return "customer:" + hashlib.sha256(customer.encode()).hexdigest()[:16]

    @singleton_task(digest, mode="lock")
    def sync(customer, full=False):
        return current_term().name

    assert sync("Émile Zola <ez@example.org>") == digest("Émile Zola <ez@example.org>")
    assert sync.simba_name is None
    assert sync.simba_name_for("a") == digest("a")


def test_a_name_function_gets_every_parameter_by_name_with_defaults():
    seen = []

    def key(self, invoice_id, kind, args, options):
        seen.append((self, invoice_id, kind, args, options))
        return f"invoice:{invoice_id}"

    class Command:
        @singleton_task(key, mode="lock")
        def handle(self, invoice_id, kind="pdf", *args, **options):
            return current_term().name

    command = Command()
    assert command.handle(5, "xml", "extra", verbosity=2) == "invoice:5"
    assert seen == [(command, 5, "xml", ("extra",), {"verbosity": 2})]
    assert Command().handle(invoice_id=6) == "invoice:6"


# -- refused at decoration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("invoice:{number}", "field {number} is not a parameter of"),
        ("invoice:{0}", "must be a parameter's name"),
        ("invoice:{}", "must be a parameter's name"),
        ("invoice:{invoice_id.pk}", "must be a parameter's name"),
        ("invoice:{invoice_id[0]}", "must be a parameter's name"),
        ("invoice:{invoice_id!r}", "conversion !r"),
        ("invoice:{invoice_id:>10}", "format spec '>10'"),
        ("invoice:{invoice_id:,d}", "format spec ',d'"),
        ("invoice:{invoice_id:{width}}", "format spec"),
        ("invoice {invoice_id}", "character ' '"),
        ("invoice:{{{invoice_id}}}", "character '{'"),
        ("invoice:{invoice_id", "is not a name template"),
        ("x" * 129 + "{invoice_id}", "its text alone is 129 characters, more than 128"),
        ("invoice:{args}", "the *args of"),
        ("invoice:{extra}", "the **extra of"),
    ],
)
def test_a_template_that_cannot_be_filled_fails_at_decoration(template, says):
    def send(invoice_id, *args, **extra):
        raise AssertionError("never called")

    with pytest.raises(InvalidName, match="invalid name") as raised:
        singleton_task(template, mode="lock")(send)
    assert says in str(raised.value)


def test_a_template_needs_room_for_the_permits():
    with pytest.raises(InvalidName, match="more than 125"):
        singleton_task("x" * 126 + "{n}", permits=10)


def test_leader_mode_refuses_a_name_per_call():
    with pytest.raises(ValueError, match="needs mode='lock'"):
        singleton_task("invoice:{invoice_id}")
    with pytest.raises(ValueError, match="needs mode='lock'"):
        singleton_task(lambda **_: "x", mode="leader")


def test_a_name_function_that_cannot_take_the_parameters_fails_at_decoration():
    def send(invoice_id, kind="pdf"):
        raise AssertionError("never called")

    with pytest.raises(TypeError, match=r"cannot take them.*add \*\*_"):
        singleton_task(lambda invoice_id: f"invoice:{invoice_id}", mode="lock")(send)
    with pytest.raises(TypeError, match="cannot take them"):
        singleton_task(lambda invoice_id, /, **_: "x", mode="lock")(send)


# -- refused at the call, naming the value ----------------------------------------------------------


def test_a_value_with_a_forbidden_character_fails_the_call_and_names_the_value():
    ran = []

    @singleton_task("invoice:{invoice_id}", mode="lock")
    def send(invoice_id):
        ran.append(invoice_id)

    with pytest.raises(InvalidName) as raised:
        send("2024/17")
    message = str(raised.value)
    assert "'invoice:2024/17'" in message and "character '/'" in message
    assert "with the call's invoice_id='2024/17'" in message
    assert ran == []
    assert registry.get_engine().leases("invoice:") == []


def test_a_name_over_the_limit_is_an_error_not_a_cut():
    @singleton_task("invoice:{invoice_id}", mode="lock")
    def send(invoice_id):
        raise AssertionError("must not run")

    send_ok = send.simba_name_for("7" * 120)
    assert len(send_ok) == 128  # at the limit: a valid name
    with pytest.raises(InvalidName, match="at most 128 characters, not 129") as raised:
        send("7" * 121)
    assert "invoice_id='7777" in str(raised.value)

    @singleton_task("invoice:{invoice_id}", permits=3)
    def export(invoice_id):
        raise AssertionError("must not run")

    with pytest.raises(InvalidName, match="at most 126 characters"):
        export("7" * 119)


def test_a_value_the_spec_cannot_format_fails_the_call():
    @singleton_task("batch:{n:04d}", mode="lock")
    def run(n):
        raise AssertionError("must not run")

    with pytest.raises(InvalidName, match=r"the call's n='abc' cannot be formatted with '04d'"):
        run("abc")


def test_a_name_function_returning_a_bad_name_fails_the_call():
    @singleton_task(lambda customer, **_: customer, mode="lock")
    def sync(customer):
        raise AssertionError("must not run")

    with pytest.raises(InvalidName, match="returned by the name function"):
        sync("a b")
    with pytest.raises(InvalidName, match="must be a str, not int"):
        sync(7)


def test_a_call_that_does_not_fit_the_signature_raises_its_type_error():
    @singleton_task("invoice:{invoice_id}", mode="lock")
    def send(invoice_id):
        raise AssertionError("must not run")

    with pytest.raises(TypeError, match="invoice_id"):
        send()
