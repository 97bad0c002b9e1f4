from __future__ import annotations

from pathlib import Path

import pytest

from metnos.mechanisms.failures import PolicyViolation
from metnos.mechanisms.sandbox.hints import HintError, expand_hint
from metnos.mechanisms.sandbox.policy import check_args, scope_for
from metnos.mechanisms.sandbox.profile import SandboxProfile
from tests.support.sandbox_env import make_env


@pytest.fixture
def sx(tmp_path):
    s = make_env(tmp_path)
    (s.home / "proj").mkdir()
    (s.home / "proj" / "a.txt").write_text("a")
    (s.home / "proj-evil").mkdir()
    (s.home / "out").mkdir()
    return s


# An instance that allows any host on any port: what is left to check is the
# manifest's own list.
ANY_HOST = ("*:*",)


def scope(sx, allow=ANY_HOST, **kw):
    return scope_for(SandboxProfile(**kw), workspace=sx.workspace, env=sx.env, allow=allow)


def violation(sx, args, schema=None, **kw) -> PolicyViolation:
    with pytest.raises(PolicyViolation) as e:
        check_args(args, schema, scope(sx, **kw))
    return e.value


def test_hint_expansion(sx):
    ws, env = sx.workspace, sx.env
    assert expand_hint("~/notes/**", workspace=ws, env=env) == sx.home / "notes"
    assert expand_hint("/tmp/*", workspace=ws, env=env) == Path("/tmp")
    assert expand_hint("$WORKSPACE/inbox/*.md", workspace=ws, env=env) == ws.data_dir / "inbox"
    for bad in ("notes", "$FOO/x", "~root/x", "/a/../b", "/a\x00b"):
        with pytest.raises(HintError):
            expand_hint(bad, workspace=ws, env=env)


def test_path_inside_grant_is_resolved(sx):
    got = check_args({"path": "~/proj/a.txt"}, None, scope(sx, fs_read=("~/proj",)))
    assert got == {"/path": sx.home / "proj" / "a.txt"}


def test_prefix_twin_is_refused(sx):
    v = violation(sx, {"path": str(sx.home / "proj-evil" / "x")}, fs_read=("~/proj",))
    assert (v.argument, v.rule) == ("/path", "outside-grant")


def test_nul_dotdot_relative(sx):
    assert violation(sx, {"path": str(sx.home / "proj/a\x00b")}, fs_read=("~/proj",)).rule == "nul-byte"
    assert violation(sx, {"path": str(sx.home / "proj/../proj-evil/x")}, fs_read=("~/proj",)).rule == "dotdot"
    assert violation(sx, {"path": "proj/a.txt"}, fs_read=("~/proj",)).rule == "relative-path"


def test_symlink_out_of_grant(sx):
    (sx.home / "proj" / "link").symlink_to(sx.home / "proj-evil")
    v = violation(sx, {"path": str(sx.home / "proj" / "link" / "x")}, fs_read=("~/proj",))
    assert v.rule == "symlink-escape"


def test_write_needs_write_grant(sx):
    schema = {"type": "object", "properties": {"target": {"type": "string", "format": "path", "x-access": "write"}}}
    v = violation(sx, {"target": str(sx.home / "proj" / "b")}, schema, fs_read=("~/proj",))
    assert v.rule == "read-only-grant"
    ok = check_args({"target": str(sx.home / "out" / "b")}, schema, scope(sx, fs_read=("~/proj",), fs_write=("~/out",)))
    assert ok["/target"] == sx.home / "out" / "b"


def test_schema_annotation_and_arrays_and_refs(sx):
    schema = {"type": "object", "$defs": {"P": {"type": "string", "format": "path"}},
              "properties": {"inputs": {"type": "array", "items": {"$ref": "#/$defs/P"}}}}
    v = violation(sx, {"inputs": [str(sx.home / "proj/a.txt"), "/etc/passwd"]}, schema, fs_read=("~/proj",))
    assert (v.argument, v.rule) == ("/inputs/1", "outside-grant")


def test_forbidden_path_even_inside_a_wide_grant(sx):
    (sx.home / ".ssh").mkdir()
    v = violation(sx, {"path": "~/.ssh/id_ed25519"}, fs_read=("~",))
    assert v.rule == "forbidden-path"
    v = violation(sx, {"path": str(sx.workspace.keys_dir / "k")}, fs_read=("~",))
    assert v.rule == "forbidden-path"


def test_profile_that_no_profile_may_hold(sx):
    for hint, rule in (("/etc", "system-path"), ("/", "system-path"), ("~/.ssh", "forbidden-path"),
                       ("$WORKSPACE/.audit", "forbidden-path"), ("rel", "bad-hint")):
        with pytest.raises(PolicyViolation) as e:
            scope(sx, fs_read=(hint,))
        assert (e.value.argument, e.value.rule) == ("profile", rule), hint


def test_hosts(sx):
    s = scope(sx, network_hosts=("api.telegram.org", "*.example.com", "localhost:8080"))
    ok = check_args({"url": "https://api.telegram.org/bot/x", "urls": ["http://a.example.com/", "http://localhost:8080/x"]}, None, s)
    assert ok["/url"] == "api.telegram.org"
    for url, rule in (("https://evil.com/", "undeclared-host"),
                      ("https://api.telegram.org@evil.com/", "undeclared-host"),
                      ("https://api.telegram.org.evil.com/", "undeclared-host"),
                      ("https://example.com/", "undeclared-host"),
                      ("http://localhost:9999/", "undeclared-host"),
                      ("file:///etc/passwd", "scheme"),
                      ("http://evil.com\\@api.telegram.org/", "malformed-url")):
        with pytest.raises(PolicyViolation) as e:
            check_args({"url": url}, None, s)
        assert e.value.rule == rule, url
    with pytest.raises(PolicyViolation) as e:
        check_args({"url": "https://api.telegram.org/"}, None, scope(sx))
    assert e.value.rule == "no-network"


def test_a_host_must_be_on_the_manifest_and_on_the_instance_list(sx):
    from metnos.mechanisms.failures import NetworkDenied

    declared = ("api.telegram.org", "*.example.com", "$NETWORK_ALLOW")
    narrow = scope(sx, allow=("api.telegram.org", "a.example.com:8080"), network_hosts=declared[:2])
    assert check_args({"url": "https://api.telegram.org/x"}, None, narrow)["/url"] == "api.telegram.org"
    for url in ("https://b.example.com/", "http://a.example.com/"):
        with pytest.raises(NetworkDenied) as e:
            check_args({"url": url}, None, narrow)
        assert e.value.details()["rule"] == "not-allowed", url
    with pytest.raises(PolicyViolation):  # on the instance list, not on the manifest's
        check_args({"url": "http://a.example.com:8080/"}, None, narrow)
    v6 = scope(sx, allow=("[::1]:8080",), network_hosts=("[::1]:*",))
    assert check_args({"url": "http://[::1]:8080/"}, None, v6)["/url"] == "::1"
    with pytest.raises(NetworkDenied):
        check_args({"url": "http://[::1]:9090/"}, None, v6)
    # $NETWORK_ALLOW: the instance's list is the whole of it.
    instance = scope(sx, allow=("example.org",), network_hosts=("$NETWORK_ALLOW",))
    assert check_args({"url": "https://example.org/"}, None, instance)["/url"] == "example.org"
    with pytest.raises(NetworkDenied):
        check_args({"url": "https://example.net/"}, None, instance)
    with pytest.raises(NetworkDenied):
        check_args({"url": "https://example.org/"}, None, scope(sx, allow=(), network_hosts=("$NETWORK_ALLOW",)))
    # Read from config.toml when not given.
    sx.workspace.config_file.write_text('[network]\nallow = ["example.org"]\n')
    from_file = scope_for(SandboxProfile(network_hosts=("$NETWORK_ALLOW",)), workspace=sx.workspace, env=sx.env)
    assert from_file.allow == ("example.org",)
    sx.workspace.config_file.write_text('[network]\nallow = "example.org"\n')
    with pytest.raises(PolicyViolation) as e:
        scope_for(SandboxProfile(network_hosts=("$NETWORK_ALLOW",)), workspace=sx.workspace, env=sx.env)
    assert e.value.rule == "bad-network-allow"


def test_opaque_data_is_not_taken_for_paths_but_the_rest_still_is(sx):
    schema = {
        "type": "object",
        "properties": {
            "entries": {"type": "array", "x-opaque": True, "items": {"type": "object"}},
            "path": {"type": "string", "format": "path"},
        },
    }
    entries = [{"path": "/etc/shadow", "url": "http://evil.example"}]
    assert check_args({"entries": entries}, schema, scope(sx)) == {}
    # Without the mark the same data is checked, and refused.
    plain = {"type": "object", "properties": {"entries": {"type": "array", "items": {"type": "object"}}}}
    assert violation(sx, {"entries": entries}, plain).argument.startswith("/entries/0/")
    # An opaque sibling does not switch off the check of a real path argument.
    assert violation(sx, {"entries": entries, "path": "/etc/shadow"}, schema).argument == "/path"


def test_host_wildcards_and_ports(sx):
    from metnos.mechanisms.sandbox.policy import check_host

    web = scope(sx, network_hosts=("*",))
    assert check_host("https://example.org/x", argument="/url", scope=web) == "example.org"
    assert violation(sx, {"url": "http://example.org:8080/"}, network_hosts=("*",)).rule == "undeclared-host"
    local = scope(sx, network_hosts=("127.0.0.1:*",))
    assert check_host("http://127.0.0.1:37761/page", argument="/url", scope=local) == "127.0.0.1"
    assert violation(sx, {"url": "http://10.0.0.1:37761/"}, network_hosts=("127.0.0.1:*",)).rule == "undeclared-host"
    pinned = scope(sx, network_hosts=("api.example.org:8443",))
    assert check_host("https://api.example.org:8443/v1", argument="/url", scope=pinned) == "api.example.org"
    assert violation(sx, {"url": "https://api.example.org/v1"}, network_hosts=("api.example.org:8443",)).rule == "undeclared-host"


def test_an_entry_path_names_the_symlink_itself_never_its_target(sx):
    """delete_files and move_files act on a link, not on what it points to (issue 18 item 2)."""
    (sx.home / "proj" / "to-out").symlink_to(sx.home / "out" / "precious")
    (sx.home / "proj" / "to-a").symlink_to("a.txt")
    entry = {"type": "object", "properties": {"path": {"type": "string", "format": "path", "x-access": "write", "x-entry": True}}}
    followed = {"type": "object", "properties": {"path": {"type": "string", "format": "path", "x-access": "write"}}}
    grant = scope(sx, fs_write=("~/proj",))
    assert check_args({"path": "~/proj/to-a"}, entry, grant) == {"/path": sx.home / "proj" / "to-a"}
    assert check_args({"path": "~/proj/to-a"}, followed, grant) == {"/path": sx.home / "proj" / "a.txt"}
    # A link out of the grant may be removed or moved as a link; writing through it stays refused.
    assert check_args({"path": "~/proj/to-out"}, entry, grant) == {"/path": sx.home / "proj" / "to-out"}
    assert violation(sx, {"path": "~/proj/to-out"}, followed, fs_write=("~/proj",)).rule == "symlink-escape"
    # Folders above the entry are still resolved: a link on the way out of the grant is an escape.
    (sx.home / "proj" / "evil-dir").symlink_to(sx.home / "proj-evil")
    assert violation(sx, {"path": "~/proj/evil-dir/x"}, entry, fs_write=("~/proj",)).rule == "symlink-escape"


def test_is_inside_decides_as_is_relative_to_does() -> None:
    # The policy check's prefix test is a faster is_relative_to: never a different answer.
    import itertools
    from pathlib import Path

    from metnos.mechanisms.sandbox.forbidden import is_inside

    cases = ["/", "/a", "/a/b", "/ab", "/a/b/c", "/a/bc", "a", "a/b", "/a/./b", "/a/b/", "//a", "/home/u/.ssh", "/home/u/.sshx"]
    for x, y in itertools.product(cases, cases):
        path, root = Path(x), Path(y)
        expected = root if path == root or path.is_relative_to(root) else None
        assert is_inside(path, [root]) == expected, (x, y)
    assert is_inside(Path("/home/u/.ssh/id"), [Path("/etc"), Path("/home/u/.ssh")]) == Path("/home/u/.ssh")


def test_forbidden_paths_resolve_as_realpath_does_with_links_anywhere_on_the_way(tmp_path):
    """The forbidden list is resolved with the folders it shares looked at once
    (metnos.mechanisms.sandbox.forbidden._realpath): it must find what os.path.realpath finds."""
    import os

    from metnos.mechanisms.sandbox.forbidden import _realpath

    home = tmp_path / "home"
    (home / "real-config" / "metnos" / "keys").mkdir(parents=True)
    (home / ".config").symlink_to("real-config")  # relative, a folder
    (tmp_path / "vault").mkdir()
    (home / ".ssh").symlink_to(tmp_path / "vault")  # absolute, outside the home
    (home / ".netrc").symlink_to(home / ".netrc-target")  # dangling
    (home / "loop-a").symlink_to("loop-b")
    (home / "loop-b").symlink_to("loop-a")
    (tmp_path / "up").symlink_to(home / "real-config" / "..")
    paths = [str(home / ".config" / "metnos" / "keys"), str(home / ".config" / "metnos"), str(home / ".ssh" / "id"),
             str(home / ".netrc"), str(home / "loop-a" / "x"), str(tmp_path / "up" / ".config"),
             str(home / ".config" / ".." / ".ssh"), str(home) + "//.ssh", str(home / "absent" / "deeper")]
    shared: dict[str, str] = {}
    for p in paths + paths:
        assert _realpath(p, shared) == os.path.realpath(p), p
