"""The offer keeps what it finds on 420 requests written as people write them (issue 30, item 6).

bench/shortlist_requests.jsonl (70 tasks, six wordings each, English and
Italian, typos, verbs the manifests do not list), measured on the seed
catalogue with the code a turn runs. The floors are the figures measured
when the rules were last changed (docs/benchmarks.md): a change that loses
recall, or offers side effects to more read-only requests, fails here.
Issue 30 asks for 99% recall; the rules reached 83% with the whole catalogue of
13 seeds offered; with 20 seeds (mail, calendar, contacts and the web added) the
catalogue no longer fits the pool, every request gets the shortlist, and the
shortlist's 65% is the figure (docs/benchmarks.md names the misses). The second
pass (request words in other forms, everyday verbs among the tags, a folder named
as a destination, a name for "someone", no change offered to a question) took
it to 81% (78% on the held-out half), and ``offer = "shaped"`` to 86%.

Three more sets (bench/shortlist_requests_blind*.jsonl) were written by writers shown only
the catalogue's names and descriptions. On them the rules find 60% to 63% of requests'
needs (73% to 74% of needed executors), and the rules of 2026-12-01 (participles, a
request that says to change nothing...) took side effects offered to read-only requests
from 10.6% to 6.0% on the third, measured once after the rules were fixed. The floors
below are those figures; issue 30 asks 99% and at most 5%. The learned offer (``offer =
"learned"``, a classifier learned from requests written apart from these sets) finds 90% to 92%
of their requests' needs (93% to 94% of needed executors).
"""

from __future__ import annotations

import pytest

from bench.shortlist_recall import BLIND_SETS, catalogue, measure_written, written_requests
from tests.unit.test_agent_bench_honesty import appears, runtime_text
from metnos.runtime.step.prefilter import PrefilterIndex
from metnos.settings.turn import DEFAULT_POOL_SIZE

SIDE_EFFECTS_OFFERED_AT_MOST = 0.05


@pytest.fixture(scope="module")
def report() -> dict:
    entries = catalogue()
    return measure_written(PrefilterIndex(entries), frozenset(e.name for e in entries if e.side_effects), DEFAULT_POOL_SIZE)


@pytest.fixture(scope="module")
def blind() -> dict:
    entries = catalogue()
    side = frozenset(e.name for e in entries if e.side_effects)
    index = PrefilterIndex(entries)
    out: dict = {}
    for path in BLIND_SETS:
        rows = written_requests(path)
        out[rows[0].split] = measure_written(index, side, DEFAULT_POOL_SIZE, rows)
    return out


@pytest.mark.parametrize("path", BLIND_SETS, ids=lambda p: p.stem)
def test_each_blind_set_is_what_the_issue_asks_for_and_unknown_to_the_runtime(path) -> None:  # noqa: ANN001
    rows = written_requests(path)
    assert len(rows) >= 300
    assert {r.lang for r in rows} == {"en", "it"}
    assert len({r.split for r in rows}) == 1
    names = {e.name for e in catalogue()}
    assert {n for r in rows for n in r.needs} <= names
    side = {e.name for e in catalogue() if e.side_effects}
    assert all(r.read_only == (not r.needs & side) for r in rows)
    # A request of a few words ("where am i") may well be an example the runtime had before the set.
    text = runtime_text()
    assert not [r.text for r in rows if len(r.text.split()) >= 5 and appears(r.text.lower(), text)]


# (shortlist recall, per executor, shaped recall, per executor, side effects offered at most) on each blind set.
BLIND_FLOORS = {"blind": (0.63, 0.74, 0.69, 0.79, 0.05), "blind2": (0.60, 0.72, 0.66, 0.77, 0.05),
                "blind3": (0.62, 0.73, 0.68, 0.78, 0.061), "blind4": (0.49, 0.63, 0.55, 0.67, 0.046),
                "blind5": (0.52, 0.66, 0.57, 0.70, 0.084), "blind6": (0.62, 0.73, 0.67, 0.77, 0.079),
                "blind7": (0.65, 0.74, 0.68, 0.77, 0.053), "blind8": (0.535, 0.66, 0.585, 0.71, 0.055),
                "blind9": (0.61, 0.715, 0.635, 0.735, 0.089)}


@pytest.mark.parametrize("split", sorted(BLIND_FLOORS))
def test_the_blind_figures_do_not_fall(blind: dict, split: str) -> None:
    short, per_short, shaped, per_shaped, side = BLIND_FLOORS[split]
    got = blind[split]
    assert got["shortlist"][split]["recall"] >= short
    assert got["shortlist"][split]["recall_per_executor"] >= per_short
    assert got["shortlist, shapers alongside"][split]["recall"] >= shaped
    assert got["shortlist, shapers alongside"][split]["recall_per_executor"] >= per_shaped
    assert got["shortlist"][split]["side_effects_offered"] <= side, got["shortlist"][split]["offered"]


# (recall, per executor, side effects offered at most) of ``offer = "learned"`` on each blind set: what the
# classifier learned from training/offer/ names (none of those requests is in a blind set), beside what the
# request's words name.
# Side effects: what each set gave, 5.3% at most (blind 3); item 6's 5% holds pooled (the test after these).
# The classifier alone decides which of the ranking's guesses stay, of the executors it knows: a mean offer of
# 3.3 to 4.1 executors a request in place of 5.1 to 5.6, for a few needed executors a set (docs/benchmarks.md).
# Since the model reads a message that needs no executor as such (``NOTHING``: 11 of the first eight sets' 3,804
# requests read so, "note to self: buy milk" among them), blind, blind3 and blind5 each lost one or two executors:
# their floors moved down by that, for side effects offered to 56% fewer of the messages that need nothing.
# blind9, sealed, was measured once, after the model and its rule on NOTHING were chosen.
LEARNED_FLOORS = {"blind": (0.97, 0.975, 0.045), "blind2": (0.98, 0.99, 0.01), "blind3": (0.975, 0.98, 0.055),
                  "blind4": (0.975, 0.98, 0.02), "blind5": (0.985, 0.99, 0.045), "blind6": (0.99, 0.99, 0.03),
                  "blind7": (0.995, 0.995, 0.01), "blind8": (0.995, 0.995, 0.02), "blind9": (0.99, 0.995, 0.025)}


def test_the_learned_offer_finds_what_issue_30_asks_for_over_every_blind_set(blind: dict) -> None:
    """Item 6: at least 99% of needed executors offered, side effects offered to at most 5% of read-only requests,
    pooled over every set written by people who never saw the rules or the model: 99.09% (6,505 of 6,565), 2.7%."""
    got = [blind[split]["shortlist and the learned offer"][split] for split in LEARNED_FLOORS]
    needed = sum(f["needed"] for f in got)
    assert sum(f["recall_per_executor"] * f["needed"] for f in got) / needed >= 0.99
    read_only = sum(f["read_only"] for f in got)
    assert sum(f["side_effects_offered"] * f["read_only"] for f in got) / read_only <= 0.05


@pytest.mark.parametrize("split", sorted(LEARNED_FLOORS))
def test_the_learned_offer_keeps_its_blind_figures(blind: dict, split: str) -> None:
    recall, per_executor, side = LEARNED_FLOORS[split]
    got = blind[split]["shortlist and the learned offer"][split]
    assert got["recall"] >= recall and got["recall_per_executor"] >= per_executor
    assert got["side_effects_offered"] <= side, got["offered"]


# The learned offer's mean offer on each blind set at most: 3.2 to 3.9 executors a request, about the shortlist's;
# 5.2 to 5.7 when it added what the classifier names to every guess of the ranking.
LEARNED_MEAN_POOL_AT_MOST = 4.2
# Side effects offered to messages that need no executor at most: 12.7% since the model reads such messages (28.7%
# before; the rules' shortlist 15.0%). Anything offered: 33.0% (99.3% before).
CHAT_SIDE_EFFECTS_AT_MOST = 0.13


@pytest.mark.parametrize("split", sorted(LEARNED_FLOORS))
def test_the_learned_offer_is_about_as_small_as_the_shortlist(blind: dict, split: str) -> None:
    assert blind[split]["shortlist and the learned offer"][split]["mean_pool"] <= LEARNED_MEAN_POOL_AT_MOST


def test_messages_that_need_nothing_are_seldom_offered_a_side_effect() -> None:
    """"hello again", "good morning", "never mind": the sealed set of messages the model answers from its own
    words (bench/shortlist_requests_chat.jsonl). Before the offer learned from such messages it offered a side
    effect to 28.7% of them, and a greeting on Telegram ended "Not done: ... set_events"."""
    from bench.shortlist_recall import CHAT_SET, offered

    rows = written_requests(CHAT_SET)
    assert len(rows) >= 300 and {r.lang for r in rows} == {"en", "it"} and not any(r.needs for r in rows)
    entries = catalogue()
    index, side = PrefilterIndex(entries), frozenset(e.name for e in entries if e.side_effects)
    pools = {r.text: set(offered(index, r.text, pool=DEFAULT_POOL_SIZE, variant="learned")) for r in rows}
    sides = [text for text, pool in pools.items() if pool & side]
    assert len(sides) / len(rows) <= CHAT_SIDE_EFFECTS_AT_MOST, sides
    assert sum(bool(pool) for pool in pools.values()) / len(rows) <= 0.34


def test_the_set_is_what_the_issue_asks_for() -> None:
    rows = written_requests()
    assert len(rows) >= 300
    assert {r.lang for r in rows} == {"en", "it"}
    # get_inputs is the dialog the runtime opens for a call without a target, not a tool a request's words call for.
    seeds = {e.name for e in catalogue() if not e.name.endswith("_recurring") and e.name != "get_inputs"}
    assert {name for r in rows for name in r.needs} == seeds
    assert {r.split for r in rows} == {"dev", "held_out"}
    # Split by task: no task has wordings on both sides.
    assert all(len({r.split for r in rows if r.task == task}) == 1 for task in {r.task for r in rows})


@pytest.mark.parametrize(("variant", "recall", "per_executor"), [
    ("shortlist", 0.81, 0.87),
    ("shortlist, shapers alongside", 0.86, 0.91),
])
def test_recall_does_not_fall(report: dict, variant: str, recall: float, per_executor: float) -> None:
    figures = report[variant]["all"]
    assert figures["recall"] >= recall, figures["misses"]
    assert figures["recall_per_executor"] >= per_executor


@pytest.mark.parametrize("variant", ["whole catalogue when it fits", "shortlist", "shortlist, shapers alongside"])
@pytest.mark.parametrize("part", ["all", "dev", "held_out"])
def test_side_effects_are_offered_to_few_read_only_requests(report: dict, variant: str, part: str) -> None:
    figures = report[variant][part]
    assert figures["side_effects_offered"] <= SIDE_EFFECTS_OFFERED_AT_MOST, figures["offered"]


def test_the_whole_catalogue_is_offered_only_when_it_fits_the_pool(report: dict) -> None:
    whole, short = report["whole catalogue when it fits"]["all"], report["shortlist"]["all"]
    if len(catalogue()) > DEFAULT_POOL_SIZE:
        # It does not fit: every request gets the shortlist.
        assert whole == short
    else:
        assert whole["recall"] > short["recall"]
    assert whole["side_effects_offered"] <= short["side_effects_offered"]
