"""The shortlist: named sources pulled in, side effects withheld unless asked for (issue 17, item 3)."""

from __future__ import annotations

from functools import lru_cache

import pytest

from metnos.runtime.step.prefilter import CatalogueEntry, PrefilterIndex
from metnos.runtime.turn.shortlist import first_by_words, shortlist

ENTRIES = [
    CatalogueEntry("read_files", affinity=("read", "file", "files", "content")),
    CatalogueEntry("find_files", affinity=("find", "files", "folder")),
    CatalogueEntry("get_urls", affinity=("fetch", "page", "url")),
    CatalogueEntry("compute_entries", affinity=("sum", "total", "count")),
    CatalogueEntry("delete_files", affinity=("delete", "remove", "files", "file"), side_effects=True),
    CatalogueEntry("send_messages", affinity=("send", "message", "tell someone"), side_effects=True),
    CatalogueEntry("schedule_recurring", affinity=("remind", "every monday"), side_effects=True),
]
INDEX = PrefilterIndex(ENTRIES)


def names(text: str) -> list[str]:
    return [c["name"] for c in shortlist(INDEX, text, pool_size=12)["candidates"]]


def test_a_named_file_brings_read_files_a_folder_find_files_a_url_get_urls() -> None:
    ranking = shortlist(INDEX, "the total of the amount column in ~/r/g.csv", pool_size=12)
    assert [c["name"] for c in ranking["candidates"]] == ["compute_entries", "read_files"]
    assert ranking["candidates"][1]["via"] == "named_source" and ranking["candidates"][1]["phrase"] == "~/r/g.csv"
    assert "find_files" in names("how many are in ~/docs")
    assert "get_urls" in names("what does https://example.org say")


def test_side_effects_are_withheld_unless_the_request_names_them() -> None:
    ranking = shortlist(INDEX, "find the files in ~/docs and count them", pool_size=12)
    assert "delete_files" not in [c["name"] for c in ranking["candidates"]]
    assert ranking["withheld"] == [{"name": "delete_files", "reason": "side effects the request does not ask for"}]
    assert "delete_files" in names("delete the files in ~/docs")
    assert "delete_files" in names("use delete_files on ~/docs/a.txt")


def test_a_multi_word_tag_counts_only_whole() -> None:
    assert "send_messages" not in names("read ~/a.md and tell me the first line")
    assert "send_messages" in names("tell someone that I am late")
    assert "schedule_recurring" not in names("find every file in ~/docs")
    assert "schedule_recurring" in names("every monday at 9 water the plants")


def test_recurring_task_builtins_only_for_requests_about_schedules() -> None:
    """The real 0.5B, offered list_recurring for "List the files in the folder ~/projects"
    (it shares "list" with the request), called it instead of find_files."""
    from metnos.runtime.step.catalogue import BUILTIN_AFFINITY, builtin_tools

    entries = [*ENTRIES[:2], *(b.entry for b in builtin_tools().values())]
    index = PrefilterIndex(entries)
    files = shortlist(index, "List the files in the folder ~/projects", pool_size=12)
    offered = [c["name"] for c in files["candidates"]]
    assert "find_files" in offered and not set(offered) & set(BUILTIN_AFFINITY)
    assert any(w["name"] == "list_recurring" for w in files.get("withheld", []))
    assert "list_recurring" in [c["name"] for c in shortlist(index, "list my reminders", pool_size=12)["candidates"]]
    assert "show_recurring" in [c["name"] for c in shortlist(index, "show the schedule of the backup", pool_size=12)["candidates"]]


def test_an_action_the_request_names_comes_in_even_past_the_ranking_cut() -> None:
    """"fetch the page, save it to ~/page.html and tell me how many bytes": write_files tied
    with two others on one word and the pre-filter's K cut it by name; the model, never
    offered it, could not save the page."""
    entries = [CatalogueEntry("get_urls", affinity=("fetch", "page", "bytes")),
               CatalogueEntry("compute_entries", affinity=("many", "count")),
               CatalogueEntry("count_lines", affinity=("many", "lines")),
               CatalogueEntry("delete_files", affinity=("delete", "files"), side_effects=True),
               CatalogueEntry("write_files", affinity=("write", "save"), side_effects=True)]
    index = PrefilterIndex(entries)
    request = "fetch the page, save it to ~/page.html and tell me how many bytes"
    ranked = [c.name for c in index.query(request, pool_size=12).candidates]
    assert "write_files" not in ranked  # the cut this rule makes up for
    pool = shortlist(index, request, pool_size=12)["candidates"]
    added = next(c for c in pool if c["name"] == "write_files")
    assert added["via"] == "named_action" and added["phrase"] == "save"
    # A request that names no action still gets none.
    assert not {"write_files", "delete_files"} & {c["name"] for c in shortlist(index, "fetch the page and count its bytes", pool_size=12)["candidates"]}


def test_an_action_is_met_in_another_form_and_not_when_negated_or_named_as_a_path() -> None:
    assert "delete_files" in names("removing ~/tmp/a.log please")
    assert "delete_files" in names("delte ~/tmp/a.log")
    assert "send_messages" in names("sending Luisa the news")
    assert "delete_files" not in names("list ~/Downloads, but don't delete anything")
    assert "delete_files" not in names("mostrami i file di ~/tmp senza eliminare niente")
    assert "send_messages" not in names("show me ~/drafts/letter.txt before I send it")
    assert "delete_files" not in names("read ~/notes/delete_me.txt")


def test_the_issue_overwrite_request_is_offered_write_files() -> None:
    """"overwrite ~/notes/todo.txt with the word replaced": the shortlist offered
    compute_entries, filter_entries, find_files and read_files, no write_files
    (issue 30). "overwrite" is in write_files's summary and its description."""
    from bench.shortlist_recall import catalogue

    index = PrefilterIndex(catalogue())
    for offer in ("shortlist", "catalogue"):
        pool = [c["name"] for c in shortlist(index, "overwrite ~/notes/todo.txt with the word replaced", pool_size=12,
                                             offer=offer)["candidates"]]
        assert "write_files" in pool, (offer, pool)


def test_a_cadence_is_met_only_as_written() -> None:
    from bench.shortlist_recall import catalogue

    index = PrefilterIndex(catalogue())
    pool = [c["name"] for c in shortlist(index, "what day of the week is it today", pool_size=12)["candidates"]]
    assert "schedule_recurring" not in pool  # "week" is not "weekly"
    pool = [c["name"] for c in shortlist(index, "water the plants weekly", pool_size=12)["candidates"]]
    assert "schedule_recurring" in pool


def test_the_whole_catalogue_is_offered_when_it_fits_the_pool_side_effects_still_withheld() -> None:
    ranking = shortlist(INDEX, "read ~/notes/a.md", pool_size=12, offer="catalogue")
    offered = [c["name"] for c in ranking["candidates"]]
    assert set(offered) == {"read_files", "find_files", "get_urls", "compute_entries"}
    assert ranking["offer"] == {"asked": "catalogue", "made": "catalogue", "size": 4}
    assert {c["via"] for c in ranking["candidates"] if c["name"] in ("get_urls", "compute_entries")} == {"catalogue"}
    withheld = {w["name"] for w in ranking["withheld"]}
    assert withheld == {"delete_files", "send_messages", "schedule_recurring"}
    asked = [c["name"] for c in shortlist(INDEX, "delete ~/notes/a.md", pool_size=12, offer="catalogue")["candidates"]]
    assert "delete_files" in asked and "send_messages" not in asked


def test_the_whole_catalogue_is_offered_in_the_catalogues_order_whatever_the_request_matched() -> None:
    # The tools open the prompt: in one order for every request, a server's prompt cache keeps them.
    by_total = [c["name"] for c in shortlist(INDEX, "the total of ~/r/g.csv", pool_size=12, offer="catalogue")["candidates"]]
    by_page = [c["name"] for c in shortlist(INDEX, "fetch the page https://example.org", pool_size=12, offer="catalogue")["candidates"]]
    assert by_total == by_page == [e.name for e in INDEX.entries if not e.side_effects]
    # The shortlist keeps the ranking's order: what the request matched comes first.
    assert [c["name"] for c in shortlist(INDEX, "fetch the page https://example.org", pool_size=12)["candidates"]][0] == "get_urls"


def test_a_catalogue_larger_than_the_pool_gets_the_shortlist_and_says_why() -> None:
    ranking = shortlist(INDEX, "what does ~/notes/a.md say", pool_size=3, offer="catalogue")
    assert [c["name"] for c in ranking["candidates"]] == [c["name"] for c in shortlist(INDEX, "what does ~/notes/a.md say", pool_size=3)["candidates"]]
    assert ranking["offer"]["made"] == "shortlist"
    assert ranking["offer"]["why"] == "the 4 executors the request may use are more than the pool of 3"


def _seed(name: str) -> CatalogueEntry:
    """A seed as the catalogue has it: its own affinity tags, from its manifest."""
    import tomllib
    from pathlib import Path

    import executors

    manifest = tomllib.loads((Path(executors.__file__).parent / name / "manifest.toml").read_text())
    return CatalogueEntry(name, affinity=tuple(manifest["executor"]["affinity"]), side_effects=manifest["contract"]["side_effects"])


SEEDS = PrefilterIndex([_seed(n) for n in ("move_files", "write_files", "delete_files", "set_events", "delete_events",
                                           "read_events", "find_files", "send_messages")])


def seed_names(text: str) -> list[str]:
    return [c["name"] for c in shortlist(SEEDS, text, pool_size=12)["candidates"]]


def test_a_file_executor_gives_way_when_the_request_names_no_file_and_another_takes_the_action() -> None:
    ranking = shortlist(SEEDS, "Move my haircut appointment to Monday at 9.", pool_size=12)
    assert "set_events" in [c["name"] for c in ranking["candidates"]]
    assert {"name": "move_files", "reason": "acts on files, and the request names none while another tool takes its action"} \
        in ranking["withheld"]
    assert "write_files" not in seed_names("Add a dinner with Sara on Monday at 20:00 to my calendar.")
    # A file, a folder or the word itself named: the file executors stay.
    assert "move_files" in seed_names("Move ~/notes/plan.md to ~/archive.")
    assert "move_files" in seed_names("Move the files about the appointment to the archive folder.")
    assert "delete_files" in seed_names("Delete the .tmp files in ~/Downloads.")
    # No other taker: nothing is withheld for this.
    assert "move_files" in seed_names("Move my drafts somewhere else.")


def test_an_everyday_verb_alone_does_not_speak_of_schedules() -> None:
    from bench.shortlist_recall import catalogue

    index = PrefilterIndex(catalogue())
    pool = [c["name"] for c in shortlist(index, "Cancel the haircut on Monday.", pool_size=12)["candidates"]]
    assert "cancel_recurring" not in pool and "delete_events" in pool, pool
    pool = [c["name"] for c in shortlist(index, "Cancel the reminder about the plants.", pool_size=12)["candidates"]]
    assert "cancel_recurring" in pool, pool


def test_a_plural_gerund_names_a_thing_not_an_action() -> None:
    """The 1.5B, offered set_events for a question about the user's settings ("settings" met
    the verb "set"), was then held to act and the turn ended not done."""
    index = PrefilterIndex([*ENTRIES, CatalogueEntry("set_events", affinity=("calendar", "appointment"), side_effects=True)])
    asked = index.actions.asked
    assert "set_events" not in asked("what language do my settings give?")
    assert "send_messages" not in asked("what were the sendings of last week?")
    assert "set_events" in asked("set a reminder in the calendar for noon")
    assert "set_events" in asked("setting the alarm for 7 is what I need")


def test_a_summary_s_quoted_example_is_no_action_tag() -> None:
    """A summary's example of the data ("friday 10:00") made "friday" an action of set_events,
    so "what do I have on friday?" was held to change the calendar."""
    quoted = CatalogueEntry(
        "set_events", affinity=("calendar",), side_effects=True,
        summary='Create or move calendar events; when: as said ("friday 10:00").',
        descriptions=(("en", 'Create or move events at a time said as people say it ("friday at 10").'),),
    )
    tags = PrefilterIndex([*ENTRIES, quoted]).action_tags["set_events"]
    assert frozenset({"friday"}) not in tags
    assert frozenset({"create"}) in tags and frozenset({"move"}) in tags


def test_a_dialog_tool_comes_only_by_its_own_tags() -> None:
    """get_inputs, met by "saying" in its description, was offered to "send elena a message saying
    it is done", and the 1.5B asked the user for an address instead of sending."""
    from metnos.runtime.step.catalogue import builtin_tools
    from metnos.runtime.step.dialog_tools import GET_INPUTS

    entries = [*ENTRIES, *(b.entry for b in builtin_tools().values() if b.entry.name == GET_INPUTS)]
    index = PrefilterIndex(entries)
    sending = shortlist(index, "send elena a message saying the report is ready", pool_size=12)
    assert GET_INPUTS not in [c["name"] for c in sending["candidates"]]
    assert {"name": GET_INPUTS, "reason": "a question to the user the request does not call for"} in sending.get("withheld", [])
    assert GET_INPUTS in names_in(index, "ask me a question before you send it")


def names_in(index: PrefilterIndex, text: str) -> list[str]:
    return [c["name"] for c in shortlist(index, text, pool_size=12)["candidates"]]


def test_what_someone_did_is_reported_not_asked() -> None:
    """The 1.5B, offered write_files alone for a question about what a sender wrote, wrote a
    report of its own invention and answered with it."""
    asked = INDEX.actions.asked
    assert "send_messages" not in asked("what did the landlord send me about the rent?")
    assert "send_messages" not in asked("has Luisa sent the photos yet?")
    assert "delete_files" not in asked("cosa ha eliminato ieri la pulizia?")
    # Past the clause, or through a modal, an action is asked.
    assert "send_messages" in asked("read the note Luisa has and send it to Luca")
    assert "send_messages" in asked("can you send the list to Elena?")
    assert "send_messages" in asked("I have to send the list to Elena")
    assert "delete_files" in asked("did the backup finish? then delete ~/tmp/old.zip")


def test_in_a_question_an_action_word_after_a_determiner_names_a_thing() -> None:
    """A question about the last commit asked for no commit: the 1.5B read the log and
    answered right, and the turn failed for not committing."""
    index = PrefilterIndex([*ENTRIES, CatalogueEntry("read_git_log", affinity=("git", "log", "history")),
                            CatalogueEntry("change_git_commit", affinity=("commit",), side_effects=True)])
    asked = index.actions.asked
    assert "change_git_commit" not in asked("what is the message of the last commit in ~/projects/x?")
    assert "change_git_commit" not in asked("qual e il messaggio dell'ultimo commit in ~/progetti/x?")
    assert "send_messages" not in asked("when was my last send?")
    # A determiner alone is not enough: some executors' tags are nouns.
    assert "change_git_commit" in asked("which files go in my commit?")
    # Outside a question, or past its clause, the word is an instruction or the action's object.
    assert "change_git_commit" in asked("commit the change in ~/projects/x")
    assert "change_git_commit" in asked("what changed in ~/projects/x? then commit it")
    assert "send_messages" in asked("write a message and send the message to Luca")


@pytest.mark.parametrize(("text", "only_questions"), [
    ("Who wrote the latest commit in the repository ~/projects/x?", True),
    ("How much space does my ~/Videos folder take?", True),
    ("Am I free on Monday morning?", True),
    ("quanti file ci sono in ~/Scaricati?", True),
    ("qual è il file più grande in ~/Scaricati?", True),
    # A question and an instruction, a request through "can", a verb first: something is to be done.
    ("Which is the largest file in ~/Downloads? Delete it.", False),
    ("What is the total, and can you send it to Luca?", False),
    ("Can you delete ~/a.txt?", False),
    ("Which of the files in ~/Downloads could you delete for me?", False),
    ("delete ~/a.txt?", False),
    ("Find the largest file in ~/Downloads and delete it.", False),
    ("puoi cancellare ~/a.txt?", False),
])
def test_a_request_of_questions_only_is_told_apart(text: str, only_questions: bool) -> None:
    from metnos.runtime.step.asked import asks_only_questions
    assert asks_only_questions(text) is only_questions


@pytest.mark.parametrize(("text", "executor", "offered"), [
    ("rm -rf ~/scratch", "delete_files", True),  # the shell's verbs are everyday words to some
    ("mv ~/a.txt ~/b.txt", "move_files", True),
    ("sovrascrivi ~/bozze/lettera.md con il nuovo testo", "write_files", True),
    ("i due video piu pesanti in ~/Video", "sort_entries", True),
    ("list ~/Documents except the .bak ones", "filter_entries", True),
    # A verb whose noun a reader asks about is no action tag: "inform" would be met by "information".
    ("the information in ~/notes/a.txt", "send_messages", False),
    # "add up" is not compute_entries's tag: "add" would then be a word of a reader, no longer write_files's action.
    ("add a line saying hello to ~/journal/today.md", "write_files", True),
    # "week" is not the clock's tag: it would be met by "weekly", and no cadence would stay schedule_recurring's.
    ("water the plants weekly", "schedule_recurring", True),
])
def test_the_seed_tags_name_each_verb_in_everyday_words(text: str, executor: str, offered: bool) -> None:
    from bench.shortlist_recall import catalogue

    index = PrefilterIndex(catalogue())
    assert (executor in [c["name"] for c in shortlist(index, text, pool_size=12)["candidates"]]) is offered


def test_shaped_offers_the_shapers_beside_an_executor_that_reads_entries() -> None:
    index = PrefilterIndex([*ENTRIES, CatalogueEntry("filter_entries", affinity=("filter", "only"))])

    def offered(text: str, offer: str) -> dict[str, dict]:
        return {c["name"]: c for c in shortlist(index, text, pool_size=12, offer=offer)["candidates"]}

    shaped = offered("the files in ~/work edited on monday", "shaped")
    assert {"find_files", "filter_entries", "compute_entries"} <= set(shaped)
    assert shaped["filter_entries"]["via"] == "alongside" and shaped["filter_entries"]["phrase"] == "find_files"
    assert "filter_entries" not in offered("the files in ~/work edited on monday", "shortlist")
    # Nothing that reads entries, nothing to shape.
    assert set(offered("send a message to Anna", "shaped")) == {"send_messages"}


@pytest.mark.parametrize(("text", "moved"), [
    ("put the photos from ~/camera into ~/albums/2024", True),
    ("shift every .csv in ~/exports to ~/archive/", True),
    ("sposta le bozze dalla ~/scrivania in ~/bozze", True),  # "in" after a path marked as a source
    ("i file sia in ~/casa che in ~/ufficio", False),  # "in" says where, not where to
    ("which notes are in both ~/a and ~/b", False),
    ("fetch https://example.org/x and put it to ~/x.html", False),  # a file is not a folder to move into
    ("don't put the photos from ~/camera into ~/albums", False),
])
def test_a_folder_named_as_where_something_goes_asks_for_a_move(text: str, moved: bool) -> None:
    index = PrefilterIndex([*ENTRIES, CatalogueEntry("move_files", affinity=("move", "rename", "files"), side_effects=True)])
    # A pool smaller than the catalogue: nothing comes in as the whole catalogue when no word matched.
    candidates = {c["name"]: c for c in shortlist(index, text, pool_size=4)["candidates"]}
    assert ("move_files" in candidates) is moved
    if moved:
        assert candidates["move_files"]["via"] == "named_action"


@pytest.mark.parametrize(("text", "sent"), [
    ("tell Marta how many files are in ~/shared", True),  # a name after the tag's verb stands for "someone"
    ("tell me how many files are in ~/shared", False),
    ("Tell me about ~/shared", False),  # a capital that opens the request is no name
    ("tell whether ~/shared is empty", False),  # a word in lower case is no name
    ("don't tell Marta what is in ~/shared", False),
])
def test_a_name_stands_for_the_person_of_a_tag(text: str, sent: bool) -> None:
    assert ("send_messages" in names(text)) is sent


@pytest.mark.parametrize(("text", "offered"), [
    ("what happens if you remove ~/a.tmp?", set()),  # a question asks for no change
    ("remove ~/a.tmp", {"delete_files"}),
    ("what happens if you remove ~/a.tmp? remove it", {"delete_files"}),  # an instruction after the question
    ("how much space does ~/music take?", {"run_commands"}),  # its output reads the world: it answers
])
def test_a_request_of_questions_only_is_offered_no_change(text: str, offered: set[str]) -> None:
    commands = CatalogueEntry("run_commands", affinity=("command", "space"), side_effects=True, output_varies="world")
    index = PrefilterIndex([*ENTRIES, commands])
    pool = {c["name"] for c in shortlist(index, text, pool_size=12)["candidates"]}
    assert pool & {"delete_files", "send_messages", "run_commands"} == offered


def test_first_by_words_is_the_best_score_on_tags_the_request_says() -> None:
    def c(name: str, score: float, hits: list[str], via: str = "rank") -> dict:
        return {"name": name, "score": score, "affinity_hits": hits, "via": via}

    ranking = {"candidates": [c("run_commands", 4.0, ["git", "repository"]), c("filter_entries", 2.0, ["has"]),
                              c("find_files", 0.0, [], "named_source"), c("read_files", 6.0, ["file"], "catalogue")]}
    assert first_by_words(ranking) == ("run_commands",)
    tied = {"candidates": [c("sort_entries", 2.5, ["largest"]), c("find_files", 2.5, ["file"]), c("get_now", 1.0, ["day"])]}
    assert first_by_words(tied) == ("sort_entries", "find_files")
    # A score from the description alone, or none at all, names nothing.
    assert first_by_words({"candidates": [c("read_files", 1.0, []), c("find_files", 0.0, [])]}) == ()
    assert first_by_words({"candidates": []}) == ()


@pytest.mark.parametrize(("text", "written"), [
    ("put the names of the pdfs from ~/papers in a file ~/papers/names.txt", True),  # "in", after a source
    ("the total of ~/bills/may.csv into ~/bills/total.txt", True),
    ("metti l'elenco di ~/foto in un file ~/foto/elenco.txt", True),
    ("make ~/plans/week.md say only: rest", True),  # a verb of making, a file its object
    ("make a contents.txt in ~/papers listing its pdfs", True),
    ("compare ~/a.txt to ~/b.txt", False),  # "to" between two files compares them
    ("count the lines in the file ~/x.txt", False),  # "in" with no source before says where, not where to
    ("make sure ~/x.txt is there", False),
    ("don't put the names from ~/papers into ~/papers/names.txt", False),
])
def test_a_file_named_as_where_something_goes_or_made_asks_for_a_write(text: str, written: bool) -> None:
    index = PrefilterIndex([*ENTRIES, CatalogueEntry("write_files", affinity=("write", "save", "file"), side_effects=True)])
    candidates = {c["name"]: c for c in shortlist(index, text, pool_size=4)["candidates"]}
    assert ("write_files" in candidates) is written


@pytest.mark.parametrize(("text", "sent"), [
    ("count the files in ~/shared and message the number to Marta", True),  # "to" and a name later in the clause
    ("message me the list of files in ~/shared", True),  # a verb naming the medium, then a person
    ("message Marta the list of files in ~/shared", True),
    ("let marta know how many files are in ~/shared", True),  # a someone between the tag's words
    ("let me know how many files are in ~/shared", False),  # the reply is how the user knows
    ("tell me the list of files in ~/shared", False),
    ("message count in ~/shared?", False),  # a noun, no person after it
    ("read my messages and the one to Marta", False),  # "messages" opens no clause of its own
])
def test_a_person_is_met_later_in_the_clause_between_the_tag_s_words_or_after_a_medium(text: str, sent: bool) -> None:
    index = PrefilterIndex([
        *ENTRIES[:4],
        CatalogueEntry("read_messages", affinity=("read", "message", "messages", "inbox")),
        CatalogueEntry("send_messages", affinity=("send", "tell someone", "message someone", "let someone know"), side_effects=True),
    ])
    assert ("send_messages" in [c["name"] for c in shortlist(index, text, pool_size=12)["candidates"]]) is sent


@lru_cache(maxsize=1)
def seed_index() -> PrefilterIndex:
    """The seed catalogue, with the builtins, as a turn ranks it."""
    from bench.shortlist_recall import catalogue

    return PrefilterIndex(catalogue())


def names_in(index: PrefilterIndex, text: str) -> list[str]:
    return [c["name"] for c in shortlist(index, text, pool_size=12)["candidates"]]


@pytest.mark.parametrize(("text", "executor", "asked"), [
    # A past participle says what was done, or names a thing: no imperative has one.
    ("Show me the emails from Paolo in my Deleted Items folder", "delete_files", False),
    ("cosa ho mandato a Marco ieri?", "send_messages", False),
    ("which files did I move last week, the ones I renamed", "move_files", False),
    ("le email nella cartella Posta eliminata", "delete_files", False),
    ("what's writen in ~/notes/a.txt?", "write_files", False),
    # A form in -s says what something does, or is a plural.
    ("list my reminders and when each one runs next", "run_commands", False),
    # A negation with its verb: "isn't", "haven't".
    ("my location isn't set up yet, ask me where I am", "set_events", False),
    # The imperative, and the infinitive and the clitic of Italian, are still asked.
    ("delete the logs in ~/tmp", "delete_files", True),
    ("elimina i file vecchi in ~/tmp", "delete_files", True),
    ("mandami la lista", "send_messages", True),
    ("run du on ~/Music", "run_commands", True),
    ("save the page to ~/page.html", "write_files", True),
    # A short word with two neighbours swapped is a slip of typing.
    ("sned me the list of files in ~/Documents", "send_messages", True),
    # A word of the catalogue is itself, not another word mistyped: "posta" is mail, not "sposta".
    ("controlla la posta di oggi", "move_files", False),
    # The first word of a hyphenated compound is a noun; so is a word after a quantifier.
    ("pull up the lasagne write-up in ~/recipes/lasagne.md", "write_files", False),
    ("what is my mean pace per run in ~/running/log.csv", "run_commands", False),
    ("show the history of the backup: every run and whether it worked", "run_commands", False),
    # "add up" is a sum.
    ("add up the amount column in ~/x.csv and tell me the total", "write_files", False),
    ("add a line saying hello to ~/journal/today.md", "write_files", True),
    ("re-send the invoice to Marco", "send_messages", True),
])
def test_an_action_word_that_is_no_instruction_is_not_asked(text: str, executor: str, asked: bool) -> None:
    assert (executor in seed_index().actions.asked(text)) is asked


@pytest.mark.parametrize(("text", "builtin"), [
    ("elenca i miei promemoria", "list_recurring"),
    ("metti in pausa il promemoria delle piante", "toggle_recurring"),
    ("fammi vedere lo storico del backup notturno", "history_recurring"),
])
def test_the_recurring_task_builtins_are_met_in_italian(text: str, builtin: str) -> None:
    assert builtin in names_in(seed_index(), text)


@pytest.mark.parametrize(("text", "offered"), [
    ("Is the weekly photo backup task paused? Just tell me, don't change it.", False),
    ("il backup settimanale è in pausa? non cambiare niente", False),
    ("list the weekly reports in ~/reports without touching anything", False),
    ("pause the weekly photo backup", True),
    ("remind me every monday to water the plants, don't change the other reminders", True),
])
def test_a_request_that_says_to_change_nothing_is_offered_no_change(text: str, offered: bool) -> None:
    index = seed_index()
    side = {e.name for e in index.entries if e.side_effects}
    got = shortlist(index, text, pool_size=12)
    assert bool(side & {c["name"] for c in got["candidates"]}) is offered, got


def test_a_recurring_task_verb_is_met_only_as_an_instruction() -> None:
    index = seed_index()
    assert "run_now_recurring" not in names_in(index, "show me the history of the invoice reminder task: when did it run and did it work?")
    assert "run_now_recurring" in names_in(index, "run the invoice reminder now")
