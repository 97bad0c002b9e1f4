"""get_urls: HTTP GET with the standard library.

urllib rather than httpx: executors run as ``python -I -S`` in the sandbox,
where site-packages is not importable; a stdlib client keeps this executor
free of any package the sandbox would have to expose.
"""

import socket
import urllib.error
import urllib.request
from html.parser import HTMLParser
from urllib.parse import urlsplit

_TEXTUAL = ("text/", "application/json", "application/xml", "application/javascript",
            "application/xhtml+xml", "application/rss+xml", "application/atom+xml", "+json", "+xml")
# The proxies from the environment: in the sandbox, the only way out is the
# egress proxy the host names there (it refuses what the instance does not allow).
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler())


class _Visible(HTMLParser):
    _SKIP = {"script", "style", "noscript", "template", "head"}
    _BREAK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "pre"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self.depth = [], 0

    def handle_starttag(self, tag, attrs):
        if tag in self._SKIP:
            self.depth += 1
        elif tag in self._BREAK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in self._SKIP and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if not self.depth:
            self.parts.append(data)

    def text(self):
        lines = (" ".join(line.split()) for line in "".join(self.parts).splitlines())
        return "\n".join(line for line in lines if line)


def _fail(url, cls, message, **extra):
    return {"url": url, **extra, "error": {"class": cls, "message": message}}


def _fetch(url, max_bytes, timeout, as_text):
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return _fail(url, "InvalidUrl", f"{url!r} is not an http(s) URL")
    req = urllib.request.Request(url, headers={"User-Agent": "Metnos/1 get_urls", "Accept": "*/*"})
    status = None
    try:
        resp = _OPENER.open(req, timeout=timeout)
    except urllib.error.HTTPError as exc:
        resp, status = exc, exc.code
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, socket.gaierror):
            return _fail(url, "DnsError", f"cannot resolve {parts.hostname}")
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return _fail(url, "Timeout", f"no answer within {timeout:g} s")
        return _fail(url, "Network", f"cannot reach {parts.hostname}: {reason}")
    except (socket.timeout, TimeoutError):
        return _fail(url, "Timeout", f"no answer within {timeout:g} s")
    except (OSError, ValueError) as exc:
        return _fail(url, "Network", f"cannot fetch {url}: {exc}")
    with resp:
        status = status or resp.status
        ctype = resp.headers.get("Content-Type", "")
        charset = resp.headers.get_content_charset() or "utf-8"
        try:
            body = resp.read(max_bytes + 1)
        except (socket.timeout, TimeoutError):
            return _fail(url, "Timeout", f"body not received within {timeout:g} s", status=status)
        final = resp.geturl()
    truncated = len(body) > max_bytes
    body = body[:max_bytes]
    entry = {"url": url, "final_url": final, "status": status, "content_type": ctype,
             "bytes": len(body), "truncated": truncated}
    mime = ctype.split(";")[0].strip().lower()
    if mime and not any(t in mime if t.startswith("+") else mime.startswith(t) for t in _TEXTUAL):
        entry["binary"] = True
    else:
        try:
            text = body.decode(charset, errors="replace")
        except LookupError:
            text = body.decode("utf-8", errors="replace")
        if as_text and mime in ("text/html", "application/xhtml+xml"):
            parser = _Visible()
            parser.feed(text)
            text = parser.text()
        entry["content"] = text
    if status >= 400:
        entry["error"] = {"class": "HttpError", "message": f"HTTP {status} from {parts.hostname}"}
    return entry


def run(args, ctx):
    max_bytes, timeout = args.get("max_bytes", 2000000), args.get("timeout_s", 10)
    entries = [_fetch(u, max_bytes, timeout, args.get("as_text", False)) for u in args["urls"]]
    failed = [e for e in entries if "error" in e]
    out = {"ok": not failed, "entries": entries,
           "metadata": {"ok_count": len(entries) - len(failed), "fail_count": len(failed)}}
    if len(entries) == 1 and "content" in entries[0]:
        out["content"] = entries[0]["content"]
    if failed:
        first = failed[0]["error"]
        out["error"] = {"class": first["class"],
                        "message": f"{len(failed)} of {len(entries)} failed; first: {first['message']}"}
    return out
