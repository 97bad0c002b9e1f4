import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from executors import SEED_DIR
from metnos.mechanisms.executors.context import build_ctx
from metnos.mechanisms.executors.install import install_seed_executors, seed_sources
from metnos.mechanisms.executors.keys import ensure_keypair
from metnos.mechanisms.executors.loader import load_executors
from metnos.mechanisms.executors.manifest import load_manifest
from metnos.mechanisms.invocation.birth import make_sandboxed_spawn
from metnos.settings.workspace import Workspace

REQUIRED = {"get_now", "find_files", "read_files", "write_files", "move_files", "delete_files", "get_urls",
            "filter_entries", "filter_lists", "compute_entries", "sort_entries", "describe_entries",
            "send_messages", "find_urls", "read_urls_html", "run_commands", "get_location"}


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.setenv("METNOS_HOME", str(tmp_path / "home"))
    return Workspace.from_env()


def test_all_seeds_sign_verify_and_pass_their_birth_tests(ws):
    key = ensure_keypair(ws)
    installed = install_seed_executors(ws, key)
    assert {d.parent.name for d in installed} >= REQUIRED
    report = load_executors(ws, key.verify_key, birth=True, spawn=make_sandboxed_spawn(ws))
    assert not report.quarantined, [(q.name, q.reason) for q in report.quarantined]
    assert not report.issues, report.issues
    assert set(report.defaults) == {d.parent.name for d in installed}
    for e in report.loaded:
        assert (e.dir / "manifest.sig").is_file() and e.origin == "seed"
        # Write and send executors must be the ones flagged for the reinforced check.
        assert e.manifest.contract.side_effects == (e.manifest.verb_category == "A")
    # Installing again (a second init) is idempotent for the verdicts.
    install_seed_executors(ws, key)
    again = load_executors(ws, key.verify_key, birth=False)
    assert {e.digest for e in again.loaded} == {e.digest for e in report.loaded}


def test_install_does_not_copy_build_debris(ws, tmp_path):
    key = ensure_keypair(ws)
    (d,) = [p for p in install_seed_executors(ws, key) if p.parent.name == "get_now"]
    assert sorted(p.name for p in d.iterdir()) == [
        "main.py", "manifest.sig", "manifest.toml", "profile.lock", "schema.json", "tests"]
    assert (d.parent / "CURRENT").read_text().strip() == load_manifest(SEED_DIR / "get_now" / "manifest.toml").version
    assert len(seed_sources()) >= 13


class _Bot(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Bot.received.append((self.path, body))
        if "/botBADTOKEN/" in self.path:
            self._answer(401, {"ok": False, "description": "Unauthorized"})
        elif body["chat_id"] == "999":
            self._answer(400, {"ok": False, "description": "Bad Request: chat not found"})
        elif body["chat_id"] == "429":
            self._answer(429, {"ok": False, "parameters": {"retry_after": 7}})
        else:
            self._answer(200, {"ok": True, "result": {"message_id": 4242}})

    def _answer(self, status, doc):
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_send_messages_telegram_channel_against_a_local_bot_api(ws, monkeypatch):
    spec = importlib.util.spec_from_file_location("seed_send_messages", SEED_DIR / "send_messages" / "main.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Bot)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    manifest = load_manifest(SEED_DIR / "send_messages" / "manifest.toml")
    ctx = build_ctx(now="2026-05-06T16:45:23+02:00", workspace=ws, profile=manifest.sandbox_profile(),
                    name="send_messages", version="1.0.0",
                    config={"telegram": {"base_url": f"http://127.0.0.1:{server.server_address[1]}",
                                         "token_env": "TEST_BOT_TOKEN", "chat_ids": {"lucia": 1234}}})
    try:
        monkeypatch.setenv("TEST_BOT_TOKEN", "GOODTOKEN")
        out = module.run({"channel": "telegram", "messages": [
            {"to_user": "lucia", "body": "back at seven"}, {"to_user": "999", "body": "x"},
            {"to_user": "429", "body": "x"}]}, ctx)
        assert [e.get("message_id") for e in out["entries"]] == ["4242", None, None]
        assert [e.get("error", {}).get("class") for e in out["entries"]] == [None, "UnknownRecipient", "RateLimited"]
        assert _Bot.received[0] == ("/botGOODTOKEN/sendMessage", {"chat_id": 1234, "text": "back at seven"})
        monkeypatch.setenv("TEST_BOT_TOKEN", "BADTOKEN")
        out = module.run({"channel": "telegram", "messages": [{"to_user": "lucia", "body": "x"}]}, ctx)
        assert out["error"]["class"] == "Unauthorized"
        assert "BADTOKEN" not in json.dumps(out)
    finally:
        server.shutdown()
        server.server_close()
