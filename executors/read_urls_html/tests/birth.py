import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARTICLE = (
    '<html lang="it"><head><title>Il giornale</title><meta charset="utf-8"></head><body>'
    '<nav><a href="/">Home</a> <a href="/sport">Sport</a> <a href="/meteo">Meteo</a></nav>'
    '<div class="ad banner">COMPRA ORA: sconto del 50% su tutto</div>'
    '<article><h1>La biblioteca riapre</h1>'
    '<p>Dopo due anni di lavori la biblioteca comunale riapre lunedì con una sala lettura nuova, '
    'aperta tutti i giorni dalle nove alle diciannove, e un archivio di giornali locali.</p>'
    '<p>Il programma completo è sul <a href="/programma">sito del comune</a>, insieme agli orari '
    'delle visite guidate per le scuole della città.</p></article>'
    '<footer>Copyright 2026 Il giornale</footer></body></html>'
).encode("utf-8")

PAGES = {
    "/article": (200, "text/html; charset=utf-8", ARTICLE),
    "/plain": (200, "text/plain; charset=utf-8", "solo testo\n".encode("utf-8")),
    "/image": (200, "image/png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64),
    "/empty": (200, "text/html", b"<html><body><script>render()</script></body></html>"),
    "/gone": (404, "text/html", b"<html><body><p>not here</p></body></html>"),
}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/moved":
            self.send_response(301)
            self.send_header("Location", "/article")
            self.send_header("Content-Length", "0")
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


def birth_main_text_without_nav_and_ads(run, tmp):
    server, base = _serve()
    try:
        out = run({"urls": [base + "/moved"]})
        assert out["ok"], out
        page = out["entries"][0]
        assert page["final_url"] == base + "/article" and page["language"] == "it", page
        assert "La biblioteca riapre" in page["title"], page["title"]
        assert "sala lettura nuova" in page["text"] and "visite guidate" in page["text"], page["text"]
        for boilerplate in ("COMPRA ORA", "Meteo", "Copyright"):
            assert boilerplate not in page["text"], (boilerplate, page["text"])
        assert out["content"] == page["text"] and "links" not in page
    finally:
        server.shutdown()


def birth_links_of_the_text_and_entries_in(run, tmp):
    server, base = _serve()
    try:
        out = run({"entries": [{"url": base + "/article"}], "links": True})
        page = out["entries"][0]
        assert page["links"] == [{"url": base + "/programma", "text": "sito del comune"}], page["links"]
        assert "[" not in page["text"] and "sito del comune" in page["text"]
        out = run({"urls": [base + "/article"], "max_chars": 100})
        page = out["entries"][0]
        assert len(page["text"]) == 100 and page["truncated"] is True and page["chars"] > 100
    finally:
        server.shutdown()


def birth_errors_name_their_cause(run, tmp):
    server, base = _serve()
    try:
        out = run({"urls": [base + "/plain", base + "/image", base + "/empty", base + "/gone", "ftp://x/y"]})
        plain, image, empty, gone, ftp = out["entries"]
        assert plain["text"] == "solo testo\n" and "error" not in plain
        assert image["error"]["class"] == "NotHtml" and "get_urls" in image["error"]["message"]
        assert empty["error"]["class"] == "NoReadableText"
        assert gone["error"]["class"] == "HttpError" and gone["status"] == 404
        assert ftp["error"]["class"] == "InvalidUrl"
        assert out["ok"] is False and out["metadata"]["fail_count"] == 4
        assert run({})["error"]["class"] == "NoInput"
    finally:
        server.shutdown()
