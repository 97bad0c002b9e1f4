"""Issue 16 item 6: the network allow-list enforced on the wire.

get_urls, signed and sandboxed, against real HTTP servers on 127.0.0.1: one
the instance allows in config.toml, one it does not. The executor has no
route out of its network namespace; the egress proxy admits the manifest's
hosts met by ``[network] allow``, checks each redirect, and every connection
lands in the invocation's event.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from metnos.adapters.cli import main
from metnos.mechanisms.executors.manifest import load_manifest
from metnos.mechanisms.invocation.runner import invoke
from metnos.runtime.booted import Runtime
from metnos.mechanisms.sandbox.bwrap import probe
from metnos.mechanisms.sandbox.profile import SandboxProfile
from metnos.settings.workspace import Workspace
from tests.support.sandbox_env import SandboxEnv, make_env
from tests.support.web_server import WebServer, web_server

pytestmark = [pytest.mark.bwrap, pytest.mark.skipif(not probe().works, reason=f"bubblewrap cannot run: {probe().error}")]

GET_URLS = Path(__file__).resolve().parents[2] / "executors" / "get_urls"


@pytest.fixture
def allowed() -> Iterator[WebServer]:
    with web_server() as s:
        yield s


@pytest.fixture
def refused() -> Iterator[WebServer]:
    with web_server() as s:
        yield s


def allow(workspace: Workspace, *patterns: str) -> None:
    workspace.config_file.parent.mkdir(parents=True, exist_ok=True)
    workspace.config_file.write_text("[network]\nallow = " + json.dumps(list(patterns)) + "\n")


def get_urls(sx: SandboxEnv, *urls: str):
    manifest = load_manifest(GET_URLS / "manifest.toml")
    schema = json.loads((GET_URLS / "schema.json").read_text())
    definitions = {"definitions": schema["definitions"]}
    out = invoke(GET_URLS, manifest.sandbox_profile(), {"urls": list(urls)},
                 {**schema["definitions"]["Input"], **definitions}, {**schema["definitions"]["Output"], **definitions},
                 workspace=sx.workspace, env=sx.env)
    assert out.sandbox_mode == "bwrap" and "egress-proxy" in out.layers, out
    return out


@pytest.fixture
def sx(tmp_path: Path, layout: str) -> SandboxEnv:
    return make_env(tmp_path, layout)


def test_get_urls_declares_the_instance_list_not_any_host() -> None:
    assert load_manifest(GET_URLS / "manifest.toml").capabilities.network == ("$NETWORK_ALLOW",)


def test_an_allowed_host_is_fetched_through_the_proxy(sx: SandboxEnv, allowed: WebServer) -> None:
    allow(sx.workspace, allowed.pattern)
    out = get_urls(sx, allowed.base + "/hello")
    assert out.ok, out
    assert out.output["content"] == f"page /hello from {allowed.pattern}"
    assert allowed.seen == ["/hello"]
    assert [dict(c) for c in out.network] == [{"host": "127.0.0.1", "port": allowed.port, "method": "GET", "allowed": True, "reason": ""}]


def test_a_host_outside_the_allow_list_is_refused_before_any_spawn(sx: SandboxEnv, allowed: WebServer, refused: WebServer) -> None:
    allow(sx.workspace, allowed.pattern)
    out = invoke(GET_URLS, load_manifest(GET_URLS / "manifest.toml").sandbox_profile(), {"urls": [refused.base + "/x"]},
                 workspace=sx.workspace, env=sx.env)
    assert out.kind == "NetworkDenied" and out.exit_code is None
    assert (out.error["host"], out.error["port"], out.error["rule"]) == ("127.0.0.1", refused.port, "not-allowed")
    assert "[network] allow" in out.error["detail"]
    assert refused.seen == []


def test_no_allow_list_means_no_host(sx: SandboxEnv, allowed: WebServer) -> None:
    out = invoke(GET_URLS, load_manifest(GET_URLS / "manifest.toml").sandbox_profile(), {"urls": [allowed.base + "/x"]},
                 workspace=sx.workspace, env=sx.env)
    assert out.kind == "NetworkDenied"
    assert allowed.seen == []


def test_a_redirect_to_a_refused_host_fails_at_the_proxy(sx: SandboxEnv, allowed: WebServer, refused: WebServer) -> None:
    allow(sx.workspace, allowed.pattern)
    allowed.redirects["/moved"] = refused.base + "/secret"
    out = get_urls(sx, allowed.base + "/moved")
    assert out.kind == "NetworkDenied", out
    assert (out.error["host"], out.error["port"]) == ("127.0.0.1", refused.port)
    assert [(c["port"], c["allowed"]) for c in out.network] == [(allowed.port, True), (refused.port, False)]
    assert allowed.seen == ["/moved"] and refused.seen == []


def test_a_redirect_within_the_list_is_followed(sx: SandboxEnv, allowed: WebServer, refused: WebServer) -> None:
    allow(sx.workspace, allowed.pattern, refused.pattern)
    allowed.redirects["/moved"] = refused.base + "/there"
    out = get_urls(sx, allowed.base + "/moved")
    assert out.ok, out
    assert out.output["entries"][0]["final_url"] == refused.base + "/there"
    assert [c["allowed"] for c in out.network] == [True, True]


def test_a_bad_allow_list_fails_closed_and_says_where(sx: SandboxEnv, allowed: WebServer) -> None:
    allow(sx.workspace, "http://bad host/")
    out = invoke(GET_URLS, load_manifest(GET_URLS / "manifest.toml").sandbox_profile(), {"urls": [allowed.base]},
                 workspace=sx.workspace, env=sx.env)
    assert out.kind == "PolicyViolation" and out.error["rule"] == "bad-network-allow"
    assert "config.toml" in out.error["detail"]
    assert allowed.seen == []


def test_each_connection_is_recorded_in_the_invocation_event(home: Path, allowed: WebServer, refused: WebServer, capsys) -> None:
    allow(Workspace.from_env(), allowed.pattern)
    allowed.redirects["/moved"] = refused.base + "/secret"
    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        call = rt.call("get_urls", {"urls": [allowed.base + "/moved"]}, caller={"kind": "test"})
        assert call.outcome.kind == "NetworkDenied", call.outcome
        events = list(rt.log.events.get(call.invocation.id))
    completed = [e for e in events if type(e).__name__ == "InvocationCompleted"]
    assert completed and completed[0].kind == "NetworkDenied"
    assert [(c["host"], c["port"], c["allowed"]) for c in completed[0].network] == [
        ("127.0.0.1", allowed.port, True), ("127.0.0.1", refused.port, False)]
    assert refused.seen == []
    # And the CLI says so, with no traceback.
    capsys.readouterr()
    code = main(["executors", "run", "get_urls", orjson.dumps({"urls": [allowed.base + "/moved"]}).decode()])
    captured = capsys.readouterr()
    assert code == 1 and "NetworkDenied" in captured.out and "failed: NetworkDenied" in captured.err
    assert "Traceback" not in captured.err


def test_the_bridge_fits_a_small_memory_cap(sx: SandboxEnv, allowed: WebServer) -> None:
    # send_messages runs with 64 MB: the bridge's threads must not eat it.
    allow(sx.workspace, allowed.pattern)
    profile = load_manifest(GET_URLS / "manifest.toml").sandbox_profile().model_copy(update={"max_memory_mb": 64})
    out = invoke(GET_URLS, profile, {"urls": [allowed.base + "/small"]}, workspace=sx.workspace, env=sx.env)
    assert out.ok, out
    assert allowed.seen == ["/small"]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is needed to make a test certificate")
def test_https_goes_end_to_end_through_a_connect_tunnel(sx: SandboxEnv, tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    certs.mkdir()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(certs / "key.pem"), "-out", str(certs / "cert.pem"), "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    with web_server() as server:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(certs / "cert.pem", certs / "key.pem")
        server.wrap(tls)
        allow(sx.workspace, server.pattern)
        code = sx.executor("tlsfetch", """
            import ssl, urllib.request
            def run(args, ctx):
                context = ssl.create_default_context(cafile=ctx["ca"])
                opener = urllib.request.build_opener(urllib.request.ProxyHandler(), urllib.request.HTTPSHandler(context=context))
                return {"body": opener.open(ctx["url"], timeout=5).read().decode()}
        """)
        profile = SandboxProfile(network_hosts=("127.0.0.1:*",), fs_read=(str(certs),))
        out = invoke(code, profile, {}, workspace=sx.workspace, env=sx.env,
                     ctx={"ca": str(certs / "cert.pem"), "url": f"https://{server.pattern}/secure"})
    assert out.ok, out
    assert out.output["body"] == f"page /secure from {server.pattern}"
    # The proxy saw a tunnel, not the request: TLS ran from the executor to the server.
    assert [(c["method"], c["port"], c["allowed"]) for c in out.network] == [("CONNECT", server.port, True)]
