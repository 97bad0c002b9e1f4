"""send_messages: the local outbox channel, and Telegram over the Bot API.

The Telegram client is urllib, not httpx: executors run as ``python -I -S``
in the sandbox, without site-packages. The bot token comes from an
environment variable named by ctx.config (never from args or ctx), and no
error message ever contains the request URL, which embeds the token.
"""

import json
import os
import re
import socket
import urllib.error
import urllib.request

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


_CHANNELS = {"outbox": _to_outbox, "telegram": _to_telegram}


def run(args, ctx):
    default = args.get("channel") or (ctx["config"].get("messages") or {}).get("default_channel") or "outbox"
    entries = []
    for msg in args["messages"]:
        channel = msg.get("channel") or default
        send = _CHANNELS.get(channel)
        if send is None:
            message_id, err = None, _error("UnknownChannel", f"no channel {channel!r} (outbox, telegram)")
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
