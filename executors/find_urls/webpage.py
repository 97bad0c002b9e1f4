"""One web page fetched for an executor: bounded in bytes and in time, through the egress proxy.

The same file lives in executors/find_urls and executors/read_urls_html (a test checks that the
two copies match): an executor's folder is signed whole and imports nothing from another one.

httpx reads the proxy variables the sandbox's host sets (http_proxy, https_proxy): in the sandbox
the only way out is the egress proxy, which refuses a host the instance does not allow, on the
first request and on every redirect alike. Its refusal is an HTTP 403 marked X-Metnos-Network (or,
for https, a refused CONNECT); either is reported here as NetworkDenied.

A page is read chunk by chunk against one deadline: a server that drips its body a byte at a
time, or sends without end, is cut off when the time or the byte budget is spent, never waited
out.
"""

import time
from urllib.parse import urlsplit

import httpx

USER_AGENT = "Metnos/1 (+https://github.com/metnos)"
MAX_REDIRECTS = 5


class FetchError(Exception):
    def __init__(self, error_class, message, status=None):
        super().__init__(message)
        self.error_class, self.message, self.status = error_class, message, status


class Page:
    def __init__(self, url, final_url, status, headers, body, truncated):
        self.url, self.final_url, self.status = url, final_url, status
        self.headers, self.body, self.truncated = headers, body, truncated

    @property
    def mime(self):
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def charset(self):
        for part in self.headers.get("content-type", "").split(";")[1:]:
            name, _, value = part.partition("=")
            if name.strip().lower() == "charset" and value.strip():
                return value.strip().strip('"').lower()
        return None

    def text(self):
        try:
            return self.body.decode(self.charset or "utf-8", errors="replace")
        except LookupError:
            return self.body.decode("utf-8", errors="replace")


def check_url(url):
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FetchError("InvalidUrl", f"{url!r} is not an http(s) URL")


def _refused(host, detail=""):
    return FetchError("NetworkDenied", f"the egress proxy refused {host}: it is not on the hosts this instance "
                                       f"allows ([network] allow in config.toml){': ' + detail if detail else ''}")


def fetch(url, *, max_bytes, timeout_s, deadline, accept="text/html,application/xhtml+xml;q=0.9,*/*;q=0.5"):
    """The page at ``url``: its first ``max_bytes`` bytes, read within ``timeout_s`` and before
    ``deadline`` (the whole call's, time.monotonic). Raises FetchError, whose class names the cause."""
    check_url(url)
    host = urlsplit(url).hostname
    deadline = min(deadline, time.monotonic() + timeout_s)
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise FetchError("Timeout", f"not fetched: the time budget was spent before {url}")
    # Each wait on the socket is bounded by the smaller of the two; the chunk loop checks the deadline.
    wait = min(timeout_s, remaining)
    headers = {"User-Agent": USER_AGENT, "Accept": accept, "Accept-Encoding": "identity"}
    try:
        with httpx.Client(follow_redirects=True, max_redirects=MAX_REDIRECTS, timeout=httpx.Timeout(wait),
                          headers=headers, trust_env=True) as client:
            with client.stream("GET", url) as resp:
                if resp.status_code == 403 and "x-metnos-network" in resp.headers:
                    raise _refused(resp.url.host)
                chunks, size, truncated = [], 0, False
                for chunk in resp.iter_bytes():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > max_bytes:
                        truncated = True
                        break
                    if time.monotonic() > deadline:
                        raise FetchError("Timeout", f"{url} was still arriving after {wait:g} s "
                                                    f"({size} bytes so far): a slow or endless sender, given up")
                body = b"".join(chunks)[:max_bytes]
                return Page(url, str(resp.url), resp.status_code, dict(resp.headers), body, truncated)
    except httpx.ProxyError as e:
        raise _refused(host, str(e)) from None
    except httpx.TimeoutException:
        raise FetchError("Timeout", f"{host} did not answer within {wait:g} s") from None
    except httpx.TooManyRedirects:
        raise FetchError("TooManyRedirects", f"{url} redirects more than {MAX_REDIRECTS} times") from None
    except httpx.ConnectError as e:
        raise FetchError("Network", f"cannot reach {host}: {e}") from None
    except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError) as e:
        raise FetchError("Network", f"cannot fetch {url}: {type(e).__name__}: {e}") from None


def http_error(page):
    """The FetchError an error status stands for, or None."""
    if page.status < 400:
        return None
    if page.status == 502 and page.headers.get("x-metnos-network"):
        return FetchError("Network", f"cannot reach {urlsplit(page.final_url).hostname}: {page.text().strip()[:200]}", page.status)
    return FetchError("HttpError", f"HTTP {page.status} from {urlsplit(page.final_url).hostname}", page.status)
