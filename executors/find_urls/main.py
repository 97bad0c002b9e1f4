"""find_urls: the links of a web page, or a web search through the instance's search endpoint.

Links: the page's <a href> resolved against its address (and its <base>), each with its anchor
text, filtered by text or domain. Search: SearXNG's JSON API at ctx.config["web"]["search_url"]
([web] search_url in config.toml). Both go through the egress proxy (webpage.py); a link found is
only listed, never followed, so reading it later is a request the proxy checks like any other.
"""

import json
import time
from urllib.parse import urlencode, urldefrag, urlsplit

import lxml.html
from lxml import etree

import webpage

BUDGET_S = 15.0
MAX_BYTES = 3000000
_SKIPPED_SCHEMES = ("javascript:", "mailto:", "tel:", "data:", "#")


def _failed(error_class, message, mode):
    return {"ok": False, "entries": [], "metadata": {"mode": mode, "count": 0, "total": 0},
            "error": {"class": error_class, "message": message}}


def _in_domain(url, domain):
    host = (urlsplit(url).hostname or "").lower()
    domain = domain.lower().strip().lstrip(".")
    return host == domain or host.endswith("." + domain)


def _keep(entry, contains, domain):
    if domain and not _in_domain(entry["url"], domain):
        return False
    if contains:
        needle = contains.lower()
        return any(needle in entry.get(k, "").lower() for k in ("url", "text", "snippet"))
    return True


def _page_links(page):
    parser = lxml.html.HTMLParser(encoding=page.charset, recover=True) if page.charset else None
    try:
        doc = lxml.html.document_fromstring(page.body, parser=parser, base_url=page.final_url)
        # A link to a place on the same page is not a page to find: dropped before it turns absolute.
        for a in doc.iter("a"):
            if (a.get("href") or "").strip().startswith("#"):
                del a.attrib["href"]
        doc.make_links_absolute(page.final_url, resolve_base_href=True, handle_failures="discard")
    except (etree.ParserError, ValueError) as e:
        raise webpage.FetchError("NotHtml", f"{page.final_url} cannot be read as HTML: {e}") from None
    links = {}
    for a in doc.iter("a"):
        href = (a.get("href") or "").strip()
        if not href or href.lower().startswith(_SKIPPED_SCHEMES) or not href.startswith(("http://", "https://")):
            continue
        url = urldefrag(href)[0]
        text = " ".join(a.text_content().split())[:200] or (a.get("title") or "").strip()[:200]
        if url not in links or (text and not links[url]):
            links[url] = text
    return [{"url": u, "text": t} for u, t in links.items()]


def _links(args):
    url = args["url"]
    page = webpage.fetch(url, max_bytes=MAX_BYTES, timeout_s=args.get("timeout_s", 10),
                         deadline=time.monotonic() + BUDGET_S)
    bad = webpage.http_error(page)
    if bad is not None:
        raise bad
    if page.mime and page.mime not in ("text/html", "application/xhtml+xml"):
        raise webpage.FetchError("NotHtml", f"{page.final_url} is {page.mime}, not a web page with links")
    return _page_links(page), {"source": page.final_url, "page_truncated": page.truncated}


def _search(args, ctx):
    endpoint = ((ctx.get("config") or {}).get("web") or {}).get("search_url") or ""
    if not endpoint:
        raise webpage.FetchError("NoSearchEndpoint", "no web search endpoint is set: set [web] search_url in "
                                 "config.toml (or METNOS_WEB_SEARCH_URL) to a SearXNG instance and put its host "
                                 "on [network] allow; find_urls with 'url' lists a page's links without one")
    query = {"q": args["query"], "format": "json"}
    if args.get("language"):
        query["language"] = args["language"]
    url = endpoint.rstrip("/") + "/search?" + urlencode(query)
    page = webpage.fetch(url, max_bytes=MAX_BYTES, timeout_s=args.get("timeout_s", 10),
                         deadline=time.monotonic() + BUDGET_S, accept="application/json")
    bad = webpage.http_error(page)
    if bad is not None:
        raise webpage.FetchError(bad.error_class, f"the search endpoint answered: {bad.message} (is [web] search_url a "
                                 "SearXNG instance with the json format enabled?)", bad.status)
    try:
        reply = json.loads(page.text())
        results = reply["results"]
        if not isinstance(results, list):
            raise TypeError("results is not a list")
    except (ValueError, KeyError, TypeError) as e:
        raise webpage.FetchError("BadSearchReply", f"the search endpoint's reply is not SearXNG's JSON "
                                 f"({type(e).__name__}: {e}); is [web] search_url a SearXNG instance?") from None
    entries = []
    for r in results:
        if isinstance(r, dict) and isinstance(r.get("url"), str) and r["url"].startswith(("http://", "https://")):
            entry = {"url": r["url"], "text": " ".join(str(r.get("title") or "").split())[:300],
                     "snippet": " ".join(str(r.get("content") or "").split())[:1000]}
            if isinstance(r.get("engine"), str):
                entry["engine"] = r["engine"]
            entries.append(entry)
    return entries, {"source": endpoint}


def run(args, ctx):
    has_url, has_query = bool(args.get("url")), bool((args.get("query") or "").strip())
    mode = "links" if has_url else "search"
    if has_url == has_query:
        return _failed("BadArguments", "give either 'url' (the links of that page) or 'query' (a web search), "
                       "not both and not neither", mode)
    try:
        found, about = _links(args) if has_url else _search(args, ctx)
    except webpage.FetchError as e:
        return _failed(e.error_class, e.message, mode)
    kept = [e for e in found if _keep(e, args.get("contains"), args.get("domain"))]
    limit = args.get("max_results", 50 if has_url else 10)
    entries = kept[:limit]
    metadata = {"mode": mode, "count": len(entries), "total": len(found), **about}
    return {"ok": True, "entries": entries, "metadata": metadata}
