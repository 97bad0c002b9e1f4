"""send_messages: the local outbox channel, Telegram over the Bot API, and mail over SMTP.

The Telegram client is urllib, not httpx: executors run as ``python -I -S``
in the sandbox, without site-packages. The bot token comes from an
environment variable named by ctx.config (never from args or ctx), and no
error message ever contains the request URL, which embeds the token.

Mail is smtplib over a socket this module opens: in the sandbox the only way
out is the egress proxy, so the TCP connection is a ``CONNECT host:port``
tunnel through it, then STARTTLS or implicit TLS end to end. The password
comes from ``METNOS_MAIL_SECRETS`` (account -> password, filled from the
vault for this call alone) and is never in an answer.
"""

import email.message
import email.utils
import json
import os
import re
import smtplib
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime

# The proxies from the environment: in the sandbox, the egress proxy is the only way out.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler())


def _error(cls, message):
    return {"class": cls, "message": message}


def _to_outbox(msg, ctx):
    folder = ctx["outbox_dir"]
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        return None, _error("OutboxUnavailable", f"cannot create the outbox: {exc.strerror}")
    stamp = re.sub(r"[^0-9A-Za-z]", "", ctx["now"])[:20]
    for _ in range(5):
        message_id = f"{stamp}-{os.urandom(4).hex()}"
        path = os.path.join(folder, message_id + ".json")
        record = {"id": message_id, "to_user": msg["to_user"], "body": msg["body"], "queued_at": ctx["now"]}
        try:
            # O_EXCL: two messages never share a file, even in the same second.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        except OSError as exc:
            return None, _error("OutboxUnavailable", f"cannot write to the outbox: {exc.strerror}")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(record, fh, ensure_ascii=False)
        return message_id, None
    return None, _error("OutboxUnavailable", "could not pick a free message id")


def _chat_id(to_user, conf):
    mapped = (conf.get("chat_ids") or {}).get(to_user)
    if mapped is not None:
        return mapped
    if re.fullmatch(r"-?\d+|@[A-Za-z0-9_]{5,}", to_user):
        return to_user
    return None


def _to_telegram(msg, ctx):
    conf = ctx["config"].get("telegram") or {}
    chat_id = _chat_id(msg["to_user"], conf)
    if chat_id is None:
        return None, _error("UnknownRecipient", f"no Telegram chat id for {msg['to_user']!r} in the configuration")
    token_env = conf.get("token_env") or "METNOS_TELEGRAM_TOKEN"
    token = os.environ.get(token_env)
    if not token:
        return None, _error("Unauthorized", f"no bot token in ${token_env}")
    base = (conf.get("base_url") or "https://api.telegram.org").rstrip("/")
    payload = json.dumps({"chat_id": chat_id, "text": msg["body"]}).encode("utf-8")
    req = urllib.request.Request(f"{base}/bot{token}/sendMessage", data=payload, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with _OPENER.open(req, timeout=float(conf.get("timeout_s", 5))) as resp:
            answer = json.loads(resp.read(1 << 20) or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            detail = json.loads(exc.read(1 << 16) or b"{}")
        except ValueError:
            detail = {}
        text = str(detail.get("description", ""))[:200]
        if exc.code in (401, 403):
            return None, _error("Unauthorized", f"Telegram refused the bot token ({exc.code})")
        if exc.code == 429:
            wait = (detail.get("parameters") or {}).get("retry_after")
            return None, _error("RateLimited", f"Telegram asks to wait {wait} s" if wait else "Telegram rate limit")
        if exc.code == 400 and "chat not found" in text.lower():
            return None, _error("UnknownRecipient", f"Telegram does not know chat {chat_id}")
        return None, _error("Network", f"Telegram answered {exc.code}: {text}")
    except urllib.error.URLError as exc:
        why = "timed out" if isinstance(exc.reason, (socket.timeout, TimeoutError)) else "unreachable"
        return None, _error("Network", f"Telegram API {why}")
    except (socket.timeout, TimeoutError):
        return None, _error("Network", "Telegram API timed out")
    except (OSError, ValueError):
        return None, _error("Network", "bad answer from the Telegram API")
    result = answer.get("result") if isinstance(answer, dict) else None
    if not (isinstance(answer, dict) and answer.get("ok") and isinstance(result, dict)):
        return None, _error("Network", "Telegram did not confirm the message")
    return str(result.get("message_id", "")), None


def _tunnel(host, port, timeout):
    """A TCP connection to host:port: through the egress proxy's CONNECT tunnel when one is named."""
    proxy = os.environ.get("https_proxy") or os.environ.get("HTTPS_PROXY")
    if not proxy:
        return socket.create_connection((host, port), timeout=timeout)
    where = urllib.parse.urlsplit(proxy)
    sock = socket.create_connection((where.hostname, where.port or 80), timeout=timeout)
    try:
        sock.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode("ascii"))
        head = b""
        # One byte at a time: the SMTP greeting that follows the proxy's answer is smtplib's to read.
        while not head.endswith(b"\r\n\r\n"):
            byte = sock.recv(1)
            if not byte or len(head) > 65536:
                raise OSError(f"the egress proxy closed the tunnel to {host}:{port}")
            head += byte
        if head.split(b" ", 2)[1:2] != [b"200"]:
            raise PermissionError(f"{host}:{port} is not allowed: add it to [network] allow in config.toml")
    except BaseException:
        sock.close()
        raise
    return sock


class _SMTP(smtplib.SMTP):
    def _get_socket(self, host, port, timeout):
        return _tunnel(host, port, timeout)


class _SMTPTLS(smtplib.SMTP_SSL):
    def _get_socket(self, host, port, timeout):
        return self.context.wrap_socket(_tunnel(host, port, timeout), server_hostname=host)


def _mail_account(ctx, wanted):
    conf = ctx["config"].get("mail") or {}
    accounts = conf.get("accounts") or {}
    name = wanted or conf.get("default_account") or (next(iter(accounts)) if len(accounts) == 1 else None)
    if name not in accounts:
        known = ", ".join(sorted(accounts)) or "none: add [mail.accounts.NAME] to config.toml"
        return None, None, _error("UnknownAccount", f"no mail account {name!r} (accounts: {known})")
    account = accounts[name]
    if not account.get("smtp_host"):
        return name, None, _error("UnknownAccount", f"mail account {name!r} has no smtp_host: add it under [mail.accounts.{name}]")
    if account.get("smtp_tls", "starttls") not in ("starttls", "implicit"):
        return name, None, _error("Tls", f"account {name!r}: smtp_tls must be starttls or implicit; mail never goes in clear")
    return name, account, None


def _address(to_user, ctx):
    recipients = (ctx["config"].get("mail") or {}).get("recipients") or {}
    # A name as people write it: "Bruno" is [mail.recipients] bruno.
    mapped = recipients.get(to_user) or {k.lower(): v for k, v in recipients.items()}.get(to_user.strip().lower())
    if mapped:
        return mapped
    if re.fullmatch(r"[^@\s<>,]+@[^@\s<>,]+\.[^@\s<>,]+", to_user):
        return to_user
    return None


def _to_mail(msg, ctx, account_name=None):
    name, account, err = _mail_account(ctx, account_name)
    if err:
        return None, err
    address = _address(msg["to_user"], ctx)
    if address is None:
        return None, _error("UnknownRecipient", f"no address for {msg['to_user']!r}: give an address, or map the name "
                                                "in [mail.recipients] in config.toml")
    try:
        password = (json.loads(os.environ.get("METNOS_MAIL_SECRETS") or "{}") or {}).get(name)
    except (ValueError, AttributeError):
        password = None
    if not password:
        return None, _error("Unauthorized", f"no password for mail account {name!r}: store it with `metnos mail password {name}`")
    host, tls_mode = account["smtp_host"], account.get("smtp_tls", "starttls")
    port = int(account.get("smtp_port") or (465 if tls_mode == "implicit" else 587))
    context = ssl.create_default_context(cadata=account["ca_pem"]) if account.get("ca_pem") else ssl.create_default_context()
    sender = account.get("from_address") or account["username"]
    mail = email.message.EmailMessage()
    mail["From"], mail["To"] = sender, address
    mail["Subject"] = msg.get("subject") or msg["body"].splitlines()[0][:78]
    # The runtime's recorded clock, not the wall clock (executors do not read it).
    mail["Date"] = email.utils.format_datetime(_parse_now(ctx["now"]))
    mail["Message-ID"] = email.utils.make_msgid(domain=(sender.rsplit("@", 1)[-1].strip(">") or "metnos"))
    mail.set_content(msg["body"])
    timeout = float(account.get("timeout_s", 15))
    try:
        if tls_mode == "implicit":
            client = _SMTPTLS(host, port, timeout=timeout, context=context)
        else:
            client = _SMTP(host, port, timeout=timeout)
        with client:
            if tls_mode == "starttls":
                client.starttls(context=context)
            client.login(account["username"], password)
            client.send_message(mail)
    except PermissionError as exc:
        return None, _error("NetworkDenied", str(exc))
    except smtplib.SMTPAuthenticationError:
        return None, _error("Unauthorized", f"mail account {name!r}: {host} refused the login of {account['username']!r}; "
                                            f"store the right password with `metnos mail password {name}`")
    except smtplib.SMTPNotSupportedError:
        return None, _error("Tls", f"account {name!r}: {host}:{port} offers no STARTTLS; set smtp_tls = \"implicit\" if it "
                                   "speaks TLS from the start")
    except smtplib.SMTPRecipientsRefused:
        return None, _error("UnknownRecipient", f"{host} refused the recipient {address}")
    except ssl.SSLError as exc:
        return None, _error("Tls", f"account {name!r}: TLS with {host}:{port} failed ({exc.reason or 'handshake'}); "
                                   "check smtp_port and smtp_tls, or ca_file for a private certificate")
    except (smtplib.SMTPException, OSError) as exc:
        return None, _error("Network", f"account {name!r}: sending through {host}:{port} failed ({type(exc).__name__})")
    return mail["Message-ID"], None


def _parse_now(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


_CHANNELS = {"outbox": _to_outbox, "telegram": _to_telegram, "mail": _to_mail}


def run(args, ctx):
    default = args.get("channel") or (ctx["config"].get("messages") or {}).get("default_channel") or "outbox"
    entries = []
    for msg in args["messages"]:
        channel = msg.get("channel") or default
        send = _CHANNELS.get(channel)
        if send is None:
            message_id, err = None, _error("UnknownChannel", f"no channel {channel!r} (outbox, telegram, mail)")
        elif channel == "mail":
            message_id, err = send(msg, ctx, args.get("account"))
        else:
            message_id, err = send(msg, ctx)
        entry = {"to_user": msg["to_user"], "channel": channel}
        if err:
            entry["error"] = err
        else:
            entry["message_id"] = message_id
        entries.append(entry)
    failed = [e for e in entries if "error" in e]
    out = {"ok": not failed, "entries": entries,
           "metadata": {"ok_count": len(entries) - len(failed), "fail_count": len(failed)}}
    if failed:
        first = failed[0]["error"]
        out["error"] = {"class": first["class"],
                        "message": f"{len(failed)} of {len(entries)} failed; first: {first['message']}"}
    return out
