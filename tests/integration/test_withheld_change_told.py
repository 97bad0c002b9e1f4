"""The dashboard's turn page names the side effects a turn was not offered because the learned offer read its
request as changing nothing, as it names the quarantined executors (tests/integration/test_quarantine_told.py).

A real daemon with ``[turn] offer = "gated"`` and a scripted model server on 127.0.0.1: a question about a job's
next run, which the rules read as asking for ``run_commands`` and the learned offer as changing nothing. Like the
CLI's notice (tests/integration/test_learned_offer_turn.py), the page says it only when the turn did not answer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.integration.test_modes import configure
from tests.integration.test_tier_roles import tiers
from tests.support.cli_process import metnos_env
from tests.support.daemon_process import start_daemon
from tests.support.scripted_llm import ScriptedLLM, text

# The rules read "run" and bring run_commands; the learned offer reads a question that changes nothing.
QUESTION = "when does the nightly sync job run next?"
# Set by the environment, the offer would not be the config's.
UNSET = ("METNOS_ENGINE_OFFER", "METNOS_LLM_URL", "METNOS_LLM_MODEL", "METNOS_LLM_PROVIDER")


def asked_on_the_dashboard(reply: str) -> tuple[dict[str, Any], str]:
    """``QUESTION`` asked of a daemon whose offer is gated and whose model says ``reply``: the outcome /api/ask
    gives, and the turn's page."""
    with ScriptedLLM([text(reply), text(reply)]) as wise:
        configure('[turn]\noffer = "gated"\n' + tiers(wise=wise.url))
        daemon = start_daemon(metnos_env({k: v for k, v in os.environ.items() if k not in UNSET}))
        try:
            with daemon.client() as client:
                asked = client.post("/api/ask", json={"text": QUESTION})
                assert asked.status_code == 200, asked.text
                outcome = asked.json()
                page = client.get(f"/turns/{outcome['turn_id']}", headers={"Accept": "text/html"})
        finally:
            daemon.stop()
        assert "run_commands" not in wise.requests[0].tool_names
    assert outcome["withheld_changes"] == ["run_commands"], outcome
    assert page.status_code == 200
    return outcome, page.text


def test_the_turn_page_names_the_change_not_offered_and_how_to_ask_for_it(home: Path) -> None:
    outcome, html = asked_on_the_dashboard("I cannot tell: I have no tool for the jobs.")
    assert outcome["status"] != "answered", outcome
    section = html[html.index('<section class="outcome withheld" id="withheld">'):]
    section = section[:section.index("</section>")]
    assert ('<a href="/executors/run_commands"><code>run_commands</code></a> has side effects, '
            "and this request reads as changing nothing: it was not offered.") in section
    assert "To make that change, say it plainly with its verb (“delete”, “move”, “send”), or name the executor." in section


def test_an_answered_turn_page_says_nothing_of_it(home: Path) -> None:
    outcome, html = asked_on_the_dashboard("Every night, as its name says.")
    assert outcome["status"] == "answered", outcome
    assert 'id="outcome"' in html
    assert 'id="withheld"' not in html and "Changes not offered" not in html
