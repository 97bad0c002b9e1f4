"""A turn's own messages go through the outbox: a step's send_messages to Telegram or mail is never lost.

The turn's step still runs send_messages itself (signed, sandboxed, judged by
the vaglio, its observation recorded as it always was, so that replay gives
the same turn): that run is the message's first attempt. Around it, each
message bound for a channel that leaves the machine (Telegram, mail) is
queued in the outbox first (``MessageQueued``, written at once: a daemon that
dies while the executor runs still has it), and its entry in the executor's
answer is recorded as that attempt's outcome: sent (with the channel's id),
failed with a cause a retry may mend (the Bot API down, a rate limit, a
time-out: the delivery worker sends it again with backoff), or given up at
once with a cause no retry mends (no chat id, no token: shown in the inbox,
where it is retried once mended, or dismissed). The local ``outbox`` folder
channel writes a file and is not an outgoing message.

Retries run send_messages again for that one message (:func:`executor_sender`),
with the caller ``{"kind": "outbox", ...}``; each run is an Invocation in the
log like any other. The step approved the message once: sending the same
words to the same person again is not a new action.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.delivery import OutgoingMessage
from metnos.services.delivery import MESSAGE, DeliveryFailed, Outbox

SEND = "send_messages"
# The channels of send_messages whose messages leave the machine (the "outbox" channel is a local folder).
LEAVING = ("telegram", "mail")
# The error classes of send_messages a later attempt may mend; any other gives the message up at once.
RETRIED = ("Network", "RateLimited")
# What of a message besides its recipient and body send_messages takes again on a retry.
KEPT = ("subject",)


class _On:
    """A host for an outbox a command uses alone (no worker: what fails waits for the daemon's)."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime


def outbox_of(runtime: Any) -> Outbox:
    """An outbox on ``runtime``'s log that only records: the daemon's worker sends what it holds."""
    return Outbox(_On(runtime))


def step_port(outbox: Outbox) -> Callable[..., Any]:
    """The runtime's ``outgoing`` port (metnos/runtime/turn/ports.py): around a send_messages step, its
    leaving messages are queued before it runs and each one's outcome recorded after."""

    def around(name: str, args: dict[str, Any], turn_id: str, run: Callable[[], Any]) -> Any:
        if name != SEND:
            return run()
        queued = _queue(outbox, args, turn_id)
        result = run()
        if queued:
            _settle(outbox, queued, result.observation if isinstance(result.observation, dict) else {})
        return result

    return around


def _default_channel(outbox: Outbox, args: dict[str, Any]) -> str:
    config = getattr(outbox.host.runtime, "config", None) or {}
    return args.get("channel") or (config.get("messages") or {}).get("default_channel") or "outbox"


def _queue(outbox: Outbox, args: dict[str, Any], turn_id: str) -> dict[int, str]:
    """Each leaving message of the step, queued and held for the step's own attempt: entry index -> message id."""
    default = _default_channel(outbox, args)
    queued: dict[int, str] = {}
    for index, msg in enumerate(args.get("messages") or []):
        if not isinstance(msg, dict):
            continue
        channel = msg.get("channel") or default
        if channel not in LEAVING:
            continue
        options = {k: msg[k] for k in KEPT if isinstance(msg.get(k), str)}
        if isinstance(args.get("account"), str):
            options["account"] = args["account"]
        queued[index] = outbox.queue(channel=channel, address=str(msg.get("to_user", "")), text=str(msg.get("body", "")),
                                     kind=MESSAGE, turn_id=turn_id, options=options, held=True)
    return queued


def _settle(outbox: Outbox, queued: dict[int, str], observation: dict[str, Any]) -> None:
    entries = observation.get("entries") if isinstance(observation.get("entries"), list) else []
    whole = observation.get("error") if isinstance(observation.get("error"), dict) else {}
    for index, message_id in queued.items():
        entry = entries[index] if index < len(entries) and isinstance(entries[index], dict) else None
        if entry is not None and "message_id" in entry and "error" not in entry:
            outbox.attempted(message_id, receipt=str(entry.get("message_id") or ""))
            continue
        # No entry: the executor did not answer for it (a time-out, a crash), which a later attempt may mend.
        error = (entry or {}).get("error") if isinstance((entry or {}).get("error"), dict) else whole
        kind = str(error.get("class") or error.get("kind") or "Failed")
        cause = f"send_messages: {kind}: {error.get('message') or 'no answer for this message'}"
        outbox.attempted(message_id, cause=cause, final=entry is not None and kind not in RETRIED)


def executor_sender(host: Any) -> Callable[[OutgoingMessage], str]:
    """The outbox's sender through send_messages: one message, as the step (or the scheduler) would send it."""

    def send(message: OutgoingMessage) -> str:
        rt = host.runtime
        options = dict(message.options or {})
        one = {"to_user": message.address, "body": message.text, **{k: options[k] for k in KEPT if k in options}}
        args: dict[str, Any] = {"channel": message.channel, "messages": [one]}
        if "account" in options:
            args["account"] = options["account"]
        caller = {"kind": "outbox", "message_id": str(message.id), **({"turn_id": message.turn_id} if message.turn_id else {})}
        call = rt.invoker.call(SEND, args, caller=caller)
        if call.invocation is not None:
            rt.log.save_now(call.invocation)
        observation = call.observation() if callable(getattr(call, "observation", None)) else {}
        entries = observation.get("entries") if isinstance(observation, dict) else None
        entry = entries[0] if isinstance(entries, list) and entries and isinstance(entries[0], dict) else {}
        if "message_id" in entry and "error" not in entry:
            return str(entry["message_id"] or "")
        error = entry.get("error") if isinstance(entry.get("error"), dict) else (observation or {}).get("error") or {}
        kind = str(error.get("class") or error.get("kind") or "Failed")
        failed = DeliveryFailed(f"send_messages: {kind}: {error.get('message') or 'no answer'}")
        # A cause no retry mends gives the message up now; it waits in the inbox to be retried once mended.
        failed.final = bool(entry) and kind not in RETRIED
        raise failed

    return send


def notice(outbox: Outbox | None, turn_id: str) -> str:
    """One sentence on a turn's messages that did not go out yet, or were given up (for the channel's reply); "" when none."""
    if outbox is None or not turn_id:
        return ""
    waiting = [m for m in outbox.waiting(turn_id) if m["kind"] == MESSAGE]
    given_up = [m for m in outbox.undelivered(turn_id) if m["kind"] == MESSAGE]
    said = []
    if waiting:
        said.append(f"{len(waiting)} message(s) could not be sent yet ({waiting[0]['cause'] or 'queued'}); they are queued in "
                    "the outbox and retried with backoff by the daemon")
    if given_up:
        said.append(f"{len(given_up)} message(s) could not be sent ({given_up[0]['cause']}); they wait in the inbox "
                    "(`metnos inbox`, the dashboard) to be retried or dismissed")
    return "; ".join(said)
