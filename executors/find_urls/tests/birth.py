import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

INDEX = (
    '<html><head><base href="/docs/"><title>Docs</title></head><body>'
    '<a href="intro.html">Introduction</a> <a href="/about">About us</a>'
    '<a href="https://mirror.example.org/docs/">Mirror</a> <a href="https://other.example.net/x#top">Other</a>'
    '<a href="javascript:void(0)">Menu</a> <a href="mailto:a@b.c">Mail</a> <a href="#top">Top</a>'
    '<a href="intro.html"></a><a href="guide.html"><img alt=""> Guide to the library</a></body></html>'
).encode("utf-8")


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        parts = urlsplit(self.path)
        if parts.path == "/search":
            q = parse_qs(parts.query)
            reply = {"query": q["q"][0], "results": [
                {"url": "https://lib.example.org/hours", "title": "Library hours", "content": "Open 9-19 for " + q["q"][0], "engine": "stand-in"},
                {"url": "https://news.example.net/library", "title": "Library reopens", "content": "News"},
                {"url": "ftp://files.example.org/x", "title": "not the web"},
            ]} if q.get("format") == ["json"] else {}
            body, ctype = json.dumps(reply).encode(), "application/json"
        elif parts.path == "/broken/search":
            body, ctype = b"<html>not json</html>", "text/html"
        elif parts.path == "/docs/":
            body, ctype = INDEX, "text/html; charset=utf-8"
        else:
            body, ctype = b"%PDF-1.4", "application/pdf"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _serve():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def birth_links_of_a_page(run, tmp):
    server, base = _serve()
    try:
        out = run({"url": base + "/docs/"})
        assert out["ok"], out
        assert out["entries"] == [
            {"url": base + "/docs/intro.html", "text": "Introduction"},
            {"url": base + "/about", "text": "About us"},
            {"url": "https://mirror.example.org/docs/", "text": "Mirror"},
            {"url": "https://other.example.net/x", "text": "Other"},
            {"url": base + "/docs/guide.html", "text": "Guide to the library"},
        ], out["entries"]
        assert out["metadata"]["mode"] == "links" and out["metadata"]["source"] == base + "/docs/"
        out = run({"url": base + "/docs/", "contains": "LIBRARY"})
        assert [e["url"] for e in out["entries"]] == [base + "/docs/guide.html"]
        out = run({"url": base + "/docs/", "domain": "example.org"})
        assert [e["url"] for e in out["entries"]] == ["https://mirror.example.org/docs/"]
        out = run({"url": base + "/docs/", "max_results": 2})
        assert out["metadata"]["count"] == 2 and out["metadata"]["total"] == 5
        assert run({"url": base + "/file.pdf"})["error"]["class"] == "NotHtml"
    finally:
        server.shutdown()


def birth_search_through_the_endpoint(run, tmp):
    server, base = _serve()
    try:
        out = run({"query": "city library"}, config={"web": {"search_url": base}})
        assert out["ok"], out
        assert out["entries"] == [
            {"url": "https://lib.example.org/hours", "text": "Library hours", "snippet": "Open 9-19 for city library", "engine": "stand-in"},
            {"url": "https://news.example.net/library", "text": "Library reopens", "snippet": "News"},
        ], out["entries"]
        out = run({"query": "city library", "domain": "example.net"}, config={"web": {"search_url": base}})
        assert [e["url"] for e in out["entries"]] == ["https://news.example.net/library"]
        out = run({"query": "x"}, config={"web": {"search_url": base + "/broken"}})
        assert out["ok"] is False and out["error"]["class"] == "BadSearchReply", out
    finally:
        server.shutdown()


def birth_no_endpoint_and_bad_arguments(run, tmp):
    out = run({"query": "anything"}, config={"web": {"search_url": ""}})
    assert out["ok"] is False and out["error"]["class"] == "NoSearchEndpoint"
    assert "[web] search_url" in out["error"]["message"] and "[network] allow" in out["error"]["message"]
    assert run({})["error"]["class"] == "BadArguments"
    assert run({"url": "http://127.0.0.1:9/", "query": "x"})["error"]["class"] == "BadArguments"
