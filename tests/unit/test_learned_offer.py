"""The learned offer (metnos/runtime/step/learned_offer.py, ``[turn] offer = "learned"``): its features,
its saved model, and how the shortlist takes what it names (issue 30 item 6)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bench.shortlist_recall import BLIND_SETS, CHAT_SET, REQUEST_SET, catalogue, written_requests
from metnos.runtime.step import learned_offer
from metnos.runtime.step.learned_offer import BUCKETS, CHANGES, NOTHING, LearnedReading, OfferModel, SparseWeights, features, load, shipped
from metnos.runtime.step.prefilter import CatalogueEntry, PrefilterIndex
from metnos.runtime.turn import shortlist as shortlist_module
from metnos.runtime.turn.shortlist import NOT_NAMED_BY_LEARNED, likeliest_first, shortlist

REPO = Path(__file__).resolve().parents[2]
TRAINING = REPO / "training" / "offer"


def test_features_are_unit_length_and_the_same_in_every_process() -> None:
    got = features("Sposta le foto di ieri in ~/Immagini")
    assert got and all(0 <= b < BUCKETS for b in got)
    assert math.isclose(math.sqrt(sum(v * v for v in got.values())), 1.0)
    # Python's own str hash changes from process to process; the buckets must not.
    code = "import json, sys; from metnos.runtime.step.learned_offer import features; print(json.dumps(sorted(features(sys.argv[1]).items())))"
    seen = {subprocess.run([sys.executable, "-c", code, "Sposta le foto di ieri in ~/Immagini"], capture_output=True, text=True,
                           check=True, cwd=REPO, env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"}).stdout
            for seed in ("1", "2")}
    assert len(seen) == 1
    assert json.loads(seen.pop()) == [list(kv) for kv in sorted(got.items())]


def test_the_shipped_model_knows_only_the_catalogue_and_asks_more_of_a_side_effect() -> None:
    model = shipped()
    assert model is not None
    assert set(model.names) - {CHANGES, NOTHING} <= {e.name for e in catalogue()}
    assert 0 < model.read_threshold < model.side_threshold < 1
    assert CHANGES in model.names and 0 < model.change_threshold < 1
    side_effecting = {e.name for e in catalogue() if e.side_effects}
    assert model.side_thresholds and set(model.side_thresholds) <= side_effecting
    assert all(model.read_threshold < t <= 1 for t in model.side_thresholds.values())
    assert len(model.digest) == 16
    probs = model.probabilities("anything at all")
    assert set(probs) == set(model.names) and all(0 < p < 1 for p in probs.values())


def test_a_saved_model_reads_back_the_same(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO))
    from training.train_offer import save

    made = OfferModel(("read_files", "send_messages", CHANGES), (-1.0, -2.0, 0.5),
                      SparseWeights.of({7: ((0, 0.5), (1, 1.25)), 9: ((1, -0.75), (2, 2.0))}), 0.2, 0.7, 0.3,
                      {"send_messages": 0.375}, 0.625)
    save(made, tmp_path / "m.npz")
    again = load(tmp_path / "m.npz")
    assert again.names == made.names and again.weights == made.weights and again.intercepts == made.intercepts
    assert (again.read_threshold, again.side_threshold, again.change_threshold) == pytest.approx((0.2, 0.7, 0.3))
    assert again.side_thresholds == {"send_messages": 0.375} and again.nothing_threshold == 0.625


def test_an_executor_with_a_threshold_of_its_own_is_held_to_it() -> None:
    # Every probability is 1/(1+e^-0.5) = 0.62: above the common side-effect threshold, below send_messages' own.
    model = OfferModel(("delete_files", "send_messages"), (0.5, 0.5), SparseWeights.of({}), 0.9, 0.6, 0.0, {"send_messages": 0.7})
    assert model.read("x", {"delete_files", "send_messages"}).tools == ("delete_files",)
    assert model.read("x", {"delete_files"}).tools == ("delete_files",)


def test_below_the_change_threshold_no_side_effect_is_offered() -> None:
    # One bucket of weight: a text holding it reads as a change, one without it does not.
    bucket = next(iter(features("zzz")))
    model = OfferModel(("read_files", "send_messages", CHANGES), (5.0, 5.0, -5.0), SparseWeights.of({bucket: ((2, 20.0),)}),
                       0.5, 0.5, 0.5)
    both = ("read_files", "send_messages")
    assert model.read("zzz", {"send_messages"}) == LearnedReading(both, True, both)
    assert model.read("qqq", {"send_messages"}) == LearnedReading(("read_files",), False, both)


def test_a_message_read_as_needing_nothing_is_offered_nothing() -> None:
    bucket = next(iter(features("zzz")))
    # "zzz" gives NOTHING 0.9986, surer than of either executor (0.993).
    model = OfferModel(("read_files", "send_messages", CHANGES, NOTHING), (5.0, 5.0, 5.0, -5.0),
                       SparseWeights.of({bucket: ((3, 40.0),)}), 0.5, 0.5, 0.5, {}, 0.5)
    both = ("read_files", "send_messages")
    assert model.read("zzz", {"send_messages"}) == LearnedReading((), False, both)
    assert model.read("qqq", {"send_messages"}) == LearnedReading(both, True, both)
    # A model without the output (nothing_threshold 0.0) reads every message as before.
    assert replace(model, nothing_threshold=0.0).read("zzz", {"send_messages"}) == LearnedReading(both, True, both)


def test_a_message_read_as_needing_nothing_keeps_what_the_model_is_surer_of() -> None:
    """NOTHING at 0.88 (logit 2): read_files at 0.99 stays, send_messages at 0.73 (and the change reading with it)
    does not."""
    bucket = next(iter(features("zzz")))
    model = OfferModel(("read_files", "send_messages", CHANGES, NOTHING), (5.0, 1.0, 5.0, -5.0),
                       SparseWeights.of({bucket: ((3, 24.0),)}), 0.5, 0.5, 0.5, {}, 0.5)
    likeliest = ("read_files", "send_messages")
    assert model.read("zzz", {"send_messages"}) == LearnedReading(("read_files",), False, likeliest)
    assert model.read("qqq", {"send_messages"}) == LearnedReading(likeliest, True, likeliest)
    # Surer of the send than of needing nothing: it stays, and so does the reading of a change.
    surer = replace(model, intercepts=(5.0, 4.0, 5.0, -5.0))
    assert surer.read("zzz", {"send_messages"}) == LearnedReading(likeliest, True, likeliest)


def model_of(tool: float, change: float, threshold: float) -> OfferModel:
    """A model whose every request gives send_messages and run_commands probability ``tool`` and CHANGES
    probability ``change`` (by intercepts alone), both held to ``threshold``."""
    logit = lambda p: math.log(p / (1 - p))  # noqa: E731
    return OfferModel(("send_messages", "run_commands", CHANGES), (logit(tool), logit(tool), logit(change)), SparseWeights.of({}),
                      0.5, threshold, 0.5)


@pytest.mark.parametrize(("tool", "change", "offered"), [(0.6, 0.99, True), (0.6, 0.7, False), (0.45, 0.99, True),
                                                          (0.95, 0.45, False)])
def test_a_side_effect_is_held_to_its_threshold_by_its_product_with_the_change_reading(
        tool: float, change: float, offered: bool) -> None:
    # 0.6 of the tool passes 0.5 alone, but not beside a doubtful change (0.42); a clear change carries 0.45 (0.45 > 0.44);
    # below the change threshold nothing with side effects is offered, however likely.
    reading = model_of(tool, change, 0.44).read("x", {"send_messages"})
    assert ("send_messages" in reading.tools) is offered


def test_a_side_effect_whose_output_answers_questions_is_offered_to_a_request_that_changes_nothing() -> None:
    reading = model_of(0.9, 0.1, 0.5).read("how much space does ~/Music take?", {"send_messages", "run_commands"},
                                            {"run_commands"})
    assert reading == LearnedReading(("run_commands",), False, ("run_commands", "send_messages"))


def test_a_file_tool_the_model_names_stays_beside_another_taker_of_its_verb(
        index: PrefilterIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    # "delete" has a taker that is not a file tool (delete_events) and the request names no file.
    text = "delete that thing i don't need anymore"
    assert "delete_files" not in [c["name"] for c in shortlist(index, text, pool_size=12)["candidates"]]
    got = offer(index, text, monkeypatch, "delete_files")
    assert "delete_files" in [c["name"] for c in got["candidates"]]


def test_a_command_the_model_names_is_offered_to_a_request_it_reads_as_changing_nothing(
        index: PrefilterIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    got = offer(index, "how big is ~/Music these days", monkeypatch, "run_commands", changes=False)
    assert "run_commands" in [c["name"] for c in got["candidates"]]


@pytest.mark.parametrize(("text", "changes"), [("what does ~/recipes/soup.txt say?", False),
                                               ("quante righe ha ~/lavoro/clienti.csv?", False),
                                               ("throw ~/recipes/soup.txt in the bin", True),
                                               ("manda a Luca il file ~/lavoro/clienti.csv", True)])
def test_the_shipped_model_reads_whether_a_request_asks_for_a_change(text: str, changes: bool) -> None:
    model = shipped()
    side_effecting = frozenset(e.name for e in catalogue() if e.side_effects)
    reading = model.read(text, side_effecting)
    assert reading.changes is changes
    assert bool(set(reading.tools) & side_effecting) is changes


def test_no_training_request_is_a_measured_one() -> None:
    measured = {r.text.casefold() for path in (REQUEST_SET, *BLIND_SETS, CHAT_SET) for r in written_requests(path)}
    training = [json.loads(line)["text"] for path in sorted(TRAINING.glob("*.jsonl"))
                for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(training) >= 3000
    assert not [t for t in training if t.casefold() in measured]


class Names:
    """A model that knows the seed catalogue, names the same executors for every request, and reads each as a
    change or not."""

    def __init__(self, *named: str, changes: bool = True, likely: dict[str, float] | None = None) -> None:
        self.names = (*(e.name for e in catalogue()), CHANGES)
        self.named = named
        self.changes = changes
        self.likely = likely or {}
        self.digest = "0123456789abcdef"
        self.side_threshold, self.side_thresholds = 0.2, {}

    def probabilities(self, text: str) -> dict[str, float]:
        return {n: self.likely.get(n, 0.0) for n in self.names}

    def read(self, text: str, side_effecting: frozenset[str], answers_questions: frozenset[str] = frozenset()) -> LearnedReading:
        # Most likely first: the named, then the rest of what it knows in the catalogue's order.
        return LearnedReading(self.named, self.changes, (*self.named, *(n for n in self.names if n not in self.named)))


@pytest.fixture
def index() -> PrefilterIndex:
    return PrefilterIndex(catalogue())


def offer(index: PrefilterIndex, text: str, monkeypatch: pytest.MonkeyPatch, *names: str, changes: bool = True,
          likely: dict[str, float] | None = None) -> dict:
    monkeypatch.setattr(shortlist_module, "shipped_offer_model", lambda: Names(*names, changes=changes, likely=likely))
    return shortlist(index, text, pool_size=12, offer="learned")


def test_a_side_effect_the_model_names_is_offered_as_asked(index: PrefilterIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    # Words the rules do not read as an instruction to send.
    text = "paolo needs the totals from ~/shop/march.csv asap"
    assert "send_messages" not in [c["name"] for c in shortlist(index, text, pool_size=12)["candidates"]]
    got = offer(index, text, monkeypatch, "send_messages", "compute_entries")
    kept = {c["name"]: c for c in got["candidates"]}
    assert kept["send_messages"]["via"] == "learned" and "compute_entries" in kept
    assert got["offer"] == {"asked": "learned", "made": "learned", "model": "0123456789abcdef"}


@pytest.mark.parametrize("text", ["which messages did I send to paolo last week?",
                                  "look at ~/shop/march.csv but don't change anything"])
def test_a_question_or_a_request_to_change_nothing_is_offered_no_side_effect_the_model_names(
        index: PrefilterIndex, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    got = offer(index, text, monkeypatch, "send_messages", "write_files", "read_files")
    names = [c["name"] for c in got["candidates"]]
    assert "read_files" in names
    assert not {"send_messages", "write_files"} & set(names)
    assert {w["name"] for w in got["withheld"]} >= {"send_messages", "write_files"}


def test_an_instruction_the_rules_read_overrules_a_reading_of_no_change(
        index: PrefilterIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    # The classifier takes one change in five of two asks in one message for none; the rules read the verb, and
    # the executor alone reaches its threshold.
    text = "what time is it? write it to ~/t.txt"
    got = offer(index, text, monkeypatch, "get_now", changes=False, likely={"write_files": 0.3})
    assert {"get_now", "write_files"} <= {c["name"] for c in got["candidates"]}
    assert "write_files" not in {w["name"] for w in got.get("withheld", [])}
    # Below it, the reading of no change holds.
    doubtful = offer(index, text, monkeypatch, "get_now", changes=False, likely={"write_files": 0.1})
    assert {"name": "write_files", "reason": "the learned offer reads the request as changing nothing"} in doubtful["withheld"]


def test_a_side_effect_the_model_never_learned_is_withheld_from_a_request_it_reads_as_changing_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # An MCP server's tool whose words the request meets: the reading of no change is all the evidence there is.
    stamp = CatalogueEntry("stamp_herbarium", summary="Stamp a herbarium sheet as checked.",
                           descriptions=(("en", "Stamp a herbarium sheet as checked: the stamp cannot be undone."),),
                           affinity=("stamp", "herbarium"), side_effects=True)
    index = PrefilterIndex([*catalogue(), stamp])
    text = "stamp the herbarium sheet of the fern"
    assert "stamp_herbarium" in {c["name"] for c in offer(index, text, monkeypatch, "read_files")["candidates"]}
    got = offer(index, text, monkeypatch, "read_files", changes=False)
    assert "stamp_herbarium" not in {c["name"] for c in got["candidates"]}
    assert {"name": "stamp_herbarium", "reason": "the learned offer reads the request as changing nothing"} in got["withheld"]
    # An executor the request names by its own name stays.
    named = offer(index, "run stamp_herbarium on the fern", monkeypatch, "read_files", changes=False)
    assert "stamp_herbarium" in [c["name"] for c in named["candidates"]]


def test_a_side_effect_the_model_never_learned_is_offered_when_the_request_says_the_verb_of_its_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seal = CatalogueEntry("seal_herbarium", summary="Seal a herbarium sheet as checked.",
                          descriptions=(("en", "Seal a herbarium sheet as checked: the seal cannot be undone."),),
                          affinity=("herbarium",), side_effects=True)
    index = PrefilterIndex([*catalogue(), seal])
    got = offer(index, "seal the herbarium sheet of the fern", monkeypatch, "read_files", changes=False)
    assert "seal_herbarium" in {c["name"] for c in got["candidates"]}
    # Its other words alone leave the reading of no change in place.
    about = offer(index, "the herbarium sheet of the fern", monkeypatch, "read_files", changes=False)
    assert {"name": "seal_herbarium", "reason": "the learned offer reads the request as changing nothing"} in about["withheld"]


def test_the_rankings_guess_the_model_knows_and_does_not_name_is_left_out_with_why(
        index: PrefilterIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    text = "read ~/notes/diary.md and tell me the last three lines"
    guessed = {c["name"] for c in shortlist(index, text, pool_size=12)["candidates"] if c.get("via", "rank") == "rank"}
    assert {"read_files", "extract_lines"} < guessed
    got = offer(index, text, monkeypatch, "read_files", "extract_lines")
    assert {c["name"] for c in got["candidates"]} == {"read_files", "extract_lines"}
    left_out = {w["name"] for w in got["withheld"] if w["reason"] == NOT_NAMED_BY_LEARNED}
    assert left_out == guessed - {"read_files", "extract_lines"}
    # A guess the request names by the executor's own name stays.
    named = offer(index, text + " with sort_entries", monkeypatch, "read_files", "extract_lines")
    assert "sort_entries" in {c["name"] for c in named["candidates"]}


def test_a_tool_that_changes_nothing_whose_verb_the_request_says_stays_though_the_model_does_not_name_it(
        index: PrefilterIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    # "describe" begins describe_entries alone among the ranked; "find" begins find_files and find_urls both.
    text = "find the markdown files in ~/docs and describe them"
    got = offer(index, text, monkeypatch, "find_files", "read_files")
    kept = {c["name"] for c in got["candidates"]}
    assert {"find_files", "read_files", "describe_entries"} <= kept
    assert {"name": "find_urls", "reason": NOT_NAMED_BY_LEARNED} in got["withheld"]
    # A tool with side effects a word meets stays withheld as the rules on side effects say.
    moved = offer(index, "shove the photos around, what's in ~/pics?", monkeypatch, "find_files", changes=False)
    assert "move_files" not in {c["name"] for c in moved["candidates"]}


def test_an_executor_the_model_never_learned_is_offered_as_the_ranking_brings_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # An MCP server's tool, a synt or a skill: the classifier knows only the catalogue it was trained on.
    herbarium = CatalogueEntry("read_herbarium", summary="Read the pressed plants of the herbarium by species.",
                               descriptions=(("en", "Read herbarium sheets: species, place and date each plant was pressed."),),
                               affinity=("herbarium", "plants", "species"))
    index = PrefilterIndex([*catalogue(), herbarium])
    text = "which plants of the herbarium were pressed in may?"
    assert "read_herbarium" in {c["name"] for c in shortlist(index, text, pool_size=12)["candidates"]}
    got = offer(index, text, monkeypatch, "read_files")
    assert "read_herbarium" in {c["name"] for c in got["candidates"]}
    assert "read_herbarium" not in {w["name"] for w in got.get("withheld", [])}


def test_what_the_model_knows_is_shown_most_likely_first_and_the_rest_keeps_its_place(
        monkeypatch: pytest.MonkeyPatch) -> None:
    herbarium = CatalogueEntry("read_herbarium", summary="Read the pressed plants of the herbarium by species.",
                               descriptions=(("en", "Read herbarium sheets: species, place and date each plant was pressed."),),
                               affinity=("herbarium", "plants", "species"))
    index = PrefilterIndex([*catalogue(), herbarium])
    text = "which plants of the herbarium in ~/notes/herbarium.csv were pressed in may? sort them by date"
    plain = [c["name"] for c in shortlist(index, text, pool_size=12)["candidates"]]
    assert plain.index("sort_entries") < plain.index("read_files")
    got = [c["name"] for c in offer(index, text, monkeypatch, "read_files", "sort_entries")["candidates"]]
    assert [n for n in got if n != "read_herbarium"] == ["read_files", "sort_entries"]
    assert got.index("read_herbarium") == plain.index("read_herbarium")


def test_likeliest_first_refills_the_places_of_the_known_in_the_models_order() -> None:
    kept = [{"name": "a"}, {"name": "mcp_tool"}, {"name": "b"}, {"name": "c"}]
    assert [c["name"] for c in likeliest_first(kept, ("c", "a", "b", "z"))] == ["c", "mcp_tool", "a", "b"]


def test_a_dialog_or_recurring_tool_the_model_names_is_offered(index: PrefilterIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    got = offer(index, "sort out that thing from before", monkeypatch, "get_inputs", "toggle_recurring")
    assert {"get_inputs", "toggle_recurring"} <= {c["name"] for c in got["candidates"]}


def test_without_a_model_the_learned_offer_is_the_shortlist(index: PrefilterIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(learned_offer, "MODEL_FILE", Path("/nonexistent/offer_model.npz"))
    monkeypatch.setattr(shortlist_module, "shipped_offer_model", lambda: None)
    text = "read ~/notes/a.txt and send it to paolo"
    got = shortlist(index, text, pool_size=12, offer="learned")
    assert [c["name"] for c in got["candidates"]] == [c["name"] for c in shortlist(index, text, pool_size=12)["candidates"]]
    assert got["offer"]["made"] == "shortlist"


def gated(index: PrefilterIndex, text: str, monkeypatch: pytest.MonkeyPatch, *names: str, changes: bool) -> dict:
    monkeypatch.setattr(shortlist_module, "shipped_offer_model", lambda: Names(*names, changes=changes))
    return shortlist(index, text, pool_size=12, offer="gated")


def test_the_gated_offer_adds_nothing_and_withholds_the_side_effects_of_a_request_read_as_no_change(
        index: PrefilterIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    text = "delete ~/notes/old.txt"
    plain = shortlist(index, text, pool_size=12)
    # Read as a change: the shortlist's ranking byte for byte (what the model names is not added), so it replays as one.
    assert gated(index, text, monkeypatch, "send_messages", "get_now", changes=True) == plain
    got = gated(index, text, monkeypatch, "send_messages", "get_now", changes=False)
    side_effecting = {e.name for e in catalogue() if e.side_effects}
    assert "delete_files" in [c["name"] for c in plain["candidates"]]
    assert [c["name"] for c in got["candidates"]] == [c["name"] for c in plain["candidates"] if c["name"] not in side_effecting]
    assert {"name": "delete_files", "reason": "the learned offer reads the request as changing nothing"} in got["withheld"]
    assert got["offer"] == {"asked": "gated", "made": "gated", "model": "0123456789abcdef"}


def test_sparse_weights_sum_each_buckets_value_times_its_weights() -> None:
    weights = SparseWeights.of({7: ((0, 0.5), (1, 1.25)), 9: ((1, -0.75),), 3: ((0, 4.0),)})
    # Bucket 5 holds no weight; bucket 3 is not in the request.
    assert weights.scores({9: 1.0, 7: 2.0, 5: 3.0}, 2).tolist() == [1.0, 1.75]
    assert weights.scores({5: 1.0}, 2).tolist() == [0.0, 0.0]
    assert (len(weights), weights.buckets()) == (4, 3)
