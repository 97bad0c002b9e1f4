"""read_messages: mail over IMAP, read-only.

imapclient (the runtime's installed packages are on this executor's path:
``python:site-packages``) over a socket this module opens: in the sandbox
there is no route out but the egress proxy, so the TCP connection is a
``CONNECT host:port`` tunnel through it, and TLS runs end to end inside.
Bodies are fetched with BODY.PEEK: reading never sets \\Seen. Attachments
are listed by name, type and size; nothing in a message is ever opened or
run. The password comes from the environment (``METNOS_MAIL_SECRETS``, a
JSON map of account name to secret, filled from the vault for this call
alone), never from args or ctx, and no error carries it.
"""

import email
import email.policy
import json
import os
import re
import socket
import ssl
from datetime import date, datetime
from email.utils import getaddresses, parsedate_to_datetime
from html.parser import HTMLParser
from urllib.parse import urlsplit

from imapclient import IMAPClient, exceptions, imap4, tls

# A message larger than this is not fetched whole: its headers only.
_WHOLE_MAX = 10 * 1024 * 1024
_TLS_MODES = ("implicit", "starttls")


class Refused(Exception):
    """Carries an error class and a message that names the cause and the fix."""

    def __init__(self, cls, message):
        super().__init__(message)
        self.cls = cls


def connect(host, port, timeout):
    """A TCP connection to host:port: through the egress proxy's CONNECT tunnel when one is named."""
    proxy = os.environ.get("https_proxy") or os.environ.get("HTTPS_PROXY")
    if not proxy:
        return socket.create_connection((host, port), timeout=timeout)
    where = urlsplit(proxy)
    sock = socket.create_connection((where.hostname, where.port or 80), timeout=timeout)
    try:
        sock.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode("ascii"))
        head = b""
        # One byte at a time: what follows the proxy's answer is the server's, not ours to eat.
        while not head.endswith(b"\r\n\r\n"):
            byte = sock.recv(1)
            if not byte or len(head) > 65536:
                raise Refused("Network", f"the egress proxy closed the tunnel to {host}:{port}")
            head += byte
        status = head.split(b" ", 2)[1] if head.count(b" ") >= 1 else b""
        if status != b"200":
            raise Refused("NetworkDenied", f"{host}:{port} is not allowed: add it to [network] allow in config.toml")
    except BaseException:
        sock.close()
        raise
    return sock


class _TunnelTLS(tls.IMAP4_TLS):
    def _create_socket(self, timeout=None):
        return tls.wrap_socket(connect(self.host, self.port, timeout or self._timeout), self.ssl_context, self.host)


class _TunnelPlain(imap4.IMAP4WithTimeout):
    def _create_socket(self, timeout=None):
        return connect(self.host, self.port, timeout if timeout is not None else self._timeout)


class _Client(IMAPClient):
    def _create_IMAP4(self):  # noqa: N802 - imapclient's name
        timeout = getattr(self._timeout, "connect", None)
        if self.ssl:
            return _TunnelTLS(self.host, self.port, self.ssl_context, timeout)
        return _TunnelPlain(self.host, self.port, timeout)


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


def html_text(html):
    parser = _Visible()
    parser.feed(html)
    parser.close()
    return parser.text()


def account_of(args, ctx):
    conf = ctx["config"].get("mail") or {}
    accounts = conf.get("accounts") or {}
    name = args.get("account") or conf.get("default_account") or (next(iter(accounts)) if len(accounts) == 1 else None)
    if not accounts:
        raise Refused("UnknownAccount", "no mail account: add one as [mail.accounts.NAME] in config.toml "
                                        "(host, port, tls, username, secret)")
    if name not in accounts:
        raise Refused("UnknownAccount", f"no mail account {name!r}: known are {', '.join(sorted(accounts))} "
                                        "([mail] default_account picks one when a request names none)")
    account = accounts[name]
    if not account.get("host"):
        raise Refused("UnknownAccount", f"mail account {name!r} has no imap_host: add it under [mail.accounts.{name}]")
    if account.get("tls", "implicit") not in _TLS_MODES:
        raise Refused("Tls", f"account {name!r}: tls must be implicit or starttls; mail never goes in clear")
    return name, account


def secret_of(name):
    try:
        secrets = json.loads(os.environ.get("METNOS_MAIL_SECRETS") or "{}")
    except ValueError:
        secrets = {}
    value = secrets.get(name) if isinstance(secrets, dict) else None
    if not value:
        raise Refused("Unauthorized", f"no password for mail account {name!r}: store it with "
                                      f"`metnos mail password {name}`")
    return value


def tls_context(account):
    pem = account.get("ca_pem")
    return ssl.create_default_context(cadata=pem) if pem else ssl.create_default_context()


def _open(name, account):
    host, tls_mode = account["host"], account.get("tls", "implicit")
    port = int(account.get("port") or (993 if tls_mode == "implicit" else 143))
    context = tls_context(account)
    password = secret_of(name)
    try:
        client = _Client(host, port=port, ssl=tls_mode == "implicit", ssl_context=context,
                         timeout=float(account.get("timeout_s", 15)))
    except Refused:
        raise
    except ssl.SSLError as exc:
        raise Refused("Tls", f"account {name!r}: TLS with {host}:{port} failed ({exc.reason or exc}); "
                             "check host and port, or ca_file for a private certificate") from None
    except (OSError, exceptions.IMAPClientError) as exc:
        raise Refused("Network", f"account {name!r}: cannot reach {host}:{port} ({exc})") from None
    try:
        if tls_mode == "starttls":
            client.starttls(context)
        client.login(account["username"], password)
    except exceptions.LoginError:
        client.shutdown()
        raise Refused("Unauthorized", f"mail account {name!r}: {host} refused the login of {account['username']!r}; "
                                      f"store the right password with `metnos mail password {name}`") from None
    except ssl.SSLError as exc:
        client.shutdown()
        raise Refused("Tls", f"account {name!r}: STARTTLS with {host}:{port} failed ({exc.reason or exc})") from None
    except (OSError, exceptions.IMAPClientError) as exc:
        client.shutdown()
        raise Refused("Network", f"account {name!r}: {host}:{port} failed at login ({type(exc).__name__})") from None
    return client


# What searches messages: asked beside folders = true (the folders' names), it would be dropped unsaid.
_SEARCH = ("from", "subject", "since", "before", "unread_only", "folder")


def _criteria(args, ctx):
    searched = [k for k in _SEARCH if args.get(k)]
    if args.get("folders") and searched:
        raise Refused("InvalidArgument", f"folders = true lists the folders' names and searches nothing, yet "
                                         f"{', '.join(searched)} asks for a search: leave folders out to read the messages")
    out = []
    if args.get("unread_only"):
        out.append("UNSEEN")
    if args.get("from"):
        out += ["FROM", args["from"]]
    if args.get("subject"):
        out += ["SUBJECT", args["subject"]]
    if args.get("since"):
        out += ["SINCE", _day(args["since"], ctx)]
    if args.get("before"):
        out += ["BEFORE", _day(args["before"], ctx)]
    return out or ["ALL"]


def _day(text, ctx):
    """A date written (YYYY-MM-DD) or said ("yesterday", "monday", "3 days ago"). A day said is read
    against the call's recorded now, never the wall clock, and means the past: mail already came."""
    if re.match(r"\d{4}-\d{2}-\d{2}", text):
        try:
            return date.fromisoformat(text[:10])
        except ValueError:
            raise Refused("InvalidArgument", f"{text!r} is not a date (YYYY-MM-DD)") from None
    from dateparser.date import DateDataParser  # only days in words need it

    now = datetime.fromisoformat(ctx["now"])
    parser = DateDataParser(languages=["en", "it"], settings={
        "RELATIVE_BASE": now.replace(tzinfo=None), "PREFER_DATES_FROM": "past",
        # The base is already the user's wall clock: no zone lookup inside the sandbox.
        "TIMEZONE": "UTC", "RETURN_AS_TIMEZONE_AWARE": False})
    found = parser.get_date_data(text)
    if found is None or found.date_obj is None:
        raise Refused("InvalidArgument", f"{text!r} is not a day: write a date (YYYY-MM-DD) or a day as people say it "
                                         "(\"yesterday\", \"monday\", \"3 days ago\")")
    return found.date_obj.date()


def _addresses(value):
    return [f"{n} <{a}>" if n else a for n, a in getaddresses([str(value)]) if a] if value else []


def _iso(value):
    try:
        return parsedate_to_datetime(str(value)).isoformat()
    except (TypeError, ValueError):
        return str(value or "")


def _body_and_attachments(msg, max_body):
    plain, html, attachments = None, None, []
    for part in msg.walk():
        if part.is_multipart():
            continue
        ctype = part.get_content_type()
        disposition = part.get_content_disposition()
        filename = part.get_filename()
        if disposition == "attachment" or filename or not ctype.startswith("text/"):
            payload = part.get_payload(decode=True) or b""
            attachments.append({"name": filename or "", "content_type": ctype, "size": len(payload)})
            continue
        try:
            text = part.get_content()
        except (LookupError, ValueError):
            text = (part.get_payload(decode=True) or b"").decode("utf-8", errors="replace")
        if ctype == "text/plain" and plain is None:
            plain = text
        elif ctype == "text/html" and html is None:
            html = text
    body = plain if plain is not None else (html_text(html) if html is not None else "")
    body = body.replace("\r\n", "\n")
    raw = body.encode("utf-8")
    truncated = len(raw) > max_body
    if truncated:
        body = raw[:max_body].decode("utf-8", errors="ignore")
    return body, truncated, attachments


def _message(uid, folder, data, max_body):
    raw = data.get(b"BODY[]") or data.get(b"BODY[HEADER]") or b""
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    entry = {
        "uid": int(uid), "folder": folder, "from": ", ".join(_addresses(msg["From"])), "to": _addresses(msg["To"]),
        "date": _iso(msg["Date"]), "subject": str(msg["Subject"] or ""),
        "flags": [f.decode() if isinstance(f, bytes) else str(f) for f in data.get(b"FLAGS", ())],
        "size": int(data.get(b"RFC822.SIZE", len(raw))),
    }
    if b"BODY[]" in data:
        entry["body"], entry["body_truncated"], entry["attachments"] = _body_and_attachments(msg, max_body)
    else:
        entry["body"], entry["body_truncated"], entry["attachments"] = "", True, []
        entry["note"] = f"larger than {_WHOLE_MAX} bytes: headers only"
    return entry


def _read(client, args, criteria):
    folder = args.get("folder") or "INBOX"
    try:
        # Read-only selection: nothing this executor does can change the mailbox.
        client.select_folder(folder, readonly=True)
    except exceptions.IMAPClientError:
        names = sorted(f[2] for f in client.list_folders())
        raise Refused("FolderNotFound", f"no folder {folder!r}; the folders are {', '.join(names)} "
                                        "(leave folder out for INBOX)") from None
    uids = sorted(client.search(criteria), reverse=True)
    shown = uids[: args.get("max_messages", 20)]
    sizes = client.fetch(shown, ["RFC822.SIZE", "FLAGS"]) if shown else {}
    whole = [u for u in shown if sizes.get(u, {}).get(b"RFC822.SIZE", 0) <= _WHOLE_MAX]
    heads = [u for u in shown if u not in whole]
    data = {}
    if whole:
        data.update(client.fetch(whole, ["BODY.PEEK[]"]))
    if heads:
        data.update(client.fetch(heads, ["BODY.PEEK[HEADER]"]))
    max_body = args.get("max_body_bytes", 20000)
    messages = [_message(u, folder, {**sizes.get(u, {}), **data.get(u, {})}, max_body) for u in shown]
    return messages, len(uids)


def run(args, ctx):
    try:
        name, account = account_of(args, ctx)
        criteria = _criteria(args, ctx)
        client = _open(name, account)
    except Refused as exc:
        return {"ok": False, "error": {"class": exc.cls, "message": str(exc)}}
    try:
        out = {"ok": True, "account": name}
        if args.get("folders"):
            out["folders"] = sorted(f[2] for f in client.list_folders())
        else:
            messages, matched = _read(client, args, criteria)
            out["messages"] = messages
            out["metadata"] = {"count": len(messages), "matched": matched, "more": matched > len(messages)}
        return out
    except Refused as exc:
        return {"ok": False, "account": name, "error": {"class": exc.cls, "message": str(exc)}}
    except (OSError, exceptions.IMAPClientError) as exc:
        return {"ok": False, "account": name,
                "error": {"class": "Network", "message": f"account {name!r}: the IMAP session failed ({type(exc).__name__}: {exc})"}}
    finally:
        try:
            client.logout()
        except Exception:  # noqa: BLE001 - the answer is already decided
            pass
