"""The egress proxy's reading of a request: what host it would admit, what it forwards."""

from __future__ import annotations

import pytest

from metnos.mechanisms.sandbox.egress import _BadRequest, parse_head


def test_connect_names_host_and_port() -> None:
    assert parse_head(b"CONNECT Example.ORG.:443 HTTP/1.1\r\nHost: x") == ("CONNECT", "example.org", 443, b"")
    assert parse_head(b"CONNECT [::1]:8443 HTTP/1.1")[1:3] == ("::1", 8443)


def test_absolute_uri_is_forwarded_in_origin_form_with_its_own_host() -> None:
    method, host, port, head = parse_head(
        b"GET http://a.example:8080/p?q=1 HTTP/1.1\r\nHost: evil.example\r\nProxy-Authorization: x\r\n"
        b"Connection: keep-alive\r\nAccept: */*")
    assert (method, host, port) == ("GET", "a.example", 8080)
    lines = head.split(b"\r\n")
    assert lines[0] == b"GET /p?q=1 HTTP/1.1"
    assert b"Host: a.example:8080" in lines and b"Host: evil.example" not in lines
    assert b"Accept: */*" in lines and b"Connection: close" in lines
    assert not any(line.lower().startswith(b"proxy-") for line in lines)
    assert head.endswith(b"\r\n\r\n")


def test_userinfo_does_not_hide_the_real_host() -> None:
    assert parse_head(b"GET http://allowed.org@refused.org/ HTTP/1.1")[1:3] == ("refused.org", 80)


@pytest.mark.parametrize("line", [
    b"GET https://a.example/ HTTP/1.1",  # TLS goes through CONNECT
    b"GET /relative HTTP/1.1",
    b"CONNECT a.example HTTP/1.1",  # no port
    b"CONNECT a.example:99999 HTTP/1.1",
    b"CONNECT a/b:443 HTTP/1.1",
    b"GARBAGE",
])
def test_malformed_requests_are_refused(line: bytes) -> None:
    with pytest.raises(_BadRequest):
        parse_head(line)
