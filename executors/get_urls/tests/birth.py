import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAGES = {
    "/hello": (200, "text/plain; charset=utf-8", "ciao è\n".encode("utf-8")),
    "/page": (200, "text/html", b"<html><head><title>t</title><style>x{}</style></head>"
                                b"<body><h1>Title</h1><p>Hello <b>world</b></p><script>evil()</script></body></html>"),
    "/big": (200, "text/plain", b"x" * 5000),
    "/img": (200, "image/png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 100),
    "/missing": (404, "text/plain", b"no such page"),
}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/hello")
            self.end_headers()
            return
        status, ctype, body = PAGES.get(self.path, (500, "text/plain", b"?"))
        self.send_response(status)
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


def birth_text_html_and_redirect(run, tmp):
    server, base = _serve()
    try:
        out = run({"urls": [base + "/hello"]})
        assert out["ok"], out
        assert out["content"] == "ciao è\n" and out["entries"][0]["status"] == 200
        out = run({"urls": [base + "/page"], "as_text": True})
        assert out["content"] == "Title\nHello world", repr(out["content"])
        out = run({"urls": [base + "/moved"]})
        assert out["content"] == "ciao è\n" and out["entries"][0]["final_url"].endswith("/hello")
    finally:
        server.shutdown()


def birth_limits_binary_and_errors(run, tmp):
    server, base = _serve()
    try:
        out = run({"urls": [base + "/big", base + "/img", base + "/missing", "ftp://x/y"], "max_bytes": 100})
        big, img, missing, ftp = out["entries"]
        assert big["truncated"] is True and len(big["content"]) == 100
        assert img["binary"] is True and "content" not in img
        assert missing["status"] == 404 and missing["error"]["class"] == "HttpError"
        assert missing["content"] == "no such page"
        assert ftp["error"]["class"] == "InvalidUrl"
        assert out["ok"] is False and out["metadata"] == {"ok_count": 2, "fail_count": 2}
    finally:
        server.shutdown()


def birth_connection_refused(run, tmp):
    server, base = _serve()
    server.shutdown()
    server.server_close()
    out = run({"urls": [base + "/hello"], "timeout_s": 2})
    assert out["ok"] is False and out["entries"][0]["error"]["class"] == "Network", out
