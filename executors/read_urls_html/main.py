"""read_urls_html: the readable text of web pages (title, main text, language, links if asked).

trafilatura finds the main text and leaves out navigation, ads and boilerplate; webpage.py fetches
through the egress proxy, bounded in bytes and time. What a page says is returned as data, never
followed: a page that tells the reader to do something is text like any other.
"""

import re
import time

import trafilatura
from trafilatura.utils import load_html

import webpage

# The whole call stays inside the manifest's max_duration_s (30 s), whatever the pages do.
BUDGET_S = 25.0
MAX_PAGES = 10
_MARKDOWN_LINK = re.compile(r"\[([^\]]*)\]\([^)\s]*\)")
_HTML_TYPES = ("text/html", "application/xhtml+xml")


def _fail(url, error_class, message, **extra):
    return {"url": url, **extra, "error": {"class": error_class, "message": message}}


def _language(tree, page):
    root = tree.getroot() if hasattr(tree, "getroot") else tree
    for value in (root.get("lang"), root.get("{http://www.w3.org/XML/1998/namespace}lang")):
        if value and value.strip():
            return value.strip()
    for meta in root.iter("meta"):
        if (meta.get("http-equiv") or "").lower() == "content-language" and meta.get("content"):
            return meta.get("content").strip()
    header = page.headers.get("content-language", "").split(",")[0].strip()
    return header or None


def _links(document, max_links):
    out, seen = [], set()
    for ref in document.body.iter("ref") if document.body is not None else ():
        target = (ref.get("target") or "").strip()
        if target.startswith(("http://", "https://")) and target not in seen:
            seen.add(target)
            out.append({"url": target, "text": " ".join("".join(ref.itertext()).split())[:200]})
            if len(out) >= max_links:
                break
    return out


def _read(url, args, deadline):
    try:
        page = webpage.fetch(url, max_bytes=args.get("max_bytes", 2000000), timeout_s=args.get("timeout_s", 10),
                             deadline=deadline)
    except webpage.FetchError as e:
        return _fail(url, e.error_class, e.message)
    meta = {"final_url": page.final_url, "status": page.status, "bytes": len(page.body)}
    if page.truncated:
        meta["page_truncated"] = True
    bad = webpage.http_error(page)
    if bad is not None:
        return _fail(url, bad.error_class, bad.message, **meta)
    if page.mime == "text/plain":
        text = page.text()
        return _entry(url, meta, None, None, text, args, [])
    if page.mime and page.mime not in _HTML_TYPES:
        return _fail(url, "NotHtml", f"{page.final_url} is {page.mime}, not a web page; get_urls fetches other content", **meta)
    tree = load_html(page.body)
    if tree is None:
        return _fail(url, "NoReadableText", f"{page.final_url} is not HTML that can be parsed", **meta)
    language = _language(tree, page)
    want_links = bool(args.get("links", False))
    document = trafilatura.bare_extraction(tree, url=page.final_url, with_metadata=True, include_links=want_links,
                                           include_comments=False, include_tables=True, deduplicate=False)
    if document is None or not (document.text or "").strip():
        return _fail(url, "NoReadableText", f"found no readable text on {page.final_url} (a page built by scripts, "
                                            "an empty page, or markup too deeply nested to read); get_urls returns "
                                            "its raw HTML", language=language, **meta)
    text = _MARKDOWN_LINK.sub(r"\1", document.text) if want_links else document.text
    links = _links(document, args.get("max_links", 50)) if want_links else []
    return _entry(url, meta, document.title, language, text, args, links, document)


def _entry(url, meta, title, language, text, args, links, document=None):
    max_chars = args.get("max_chars", 20000)
    entry = {"url": url, **meta, "title": title or "", "language": language, "text": text[:max_chars],
             "chars": len(text), "truncated": len(text) > max_chars}
    if document is not None:
        for field in ("author", "date", "description", "sitename"):
            value = getattr(document, field, None)
            if value:
                entry[field] = str(value)
    if args.get("links", False):
        entry["links"] = links
    return entry


def run(args, ctx):
    urls = list(args.get("urls") or [])
    urls += [e["url"] for e in args.get("entries") or [] if isinstance(e, dict) and isinstance(e.get("url"), str)]
    urls = list(dict.fromkeys(u for u in urls if u.strip()))
    if not urls:
        return {"ok": False, "error": {"class": "NoInput", "message": "give urls, or the entries of a previous step with a 'url'"}}
    skipped = urls[MAX_PAGES:]
    deadline = time.monotonic() + BUDGET_S
    entries = [_read(u, args, deadline) for u in urls[:MAX_PAGES]]
    failed = [e for e in entries if "error" in e]
    out = {"ok": not failed, "entries": entries,
           "metadata": {"ok_count": len(entries) - len(failed), "fail_count": len(failed), "skipped": len(skipped)}}
    if len(entries) == 1 and not failed:
        out["content"] = entries[0]["text"]
    if failed:
        first = failed[0]["error"]
        out["error"] = {"class": first["class"],
                        "message": f"{len(failed)} of {len(entries)} failed; first: {first['message']}"}
    return out
