"""The daemon's HTTP API: each route calls the service the CLI calls and returns its data as JSON.

Errors are JSON too, ``{"error": {"kind", "message"}}``: a Metnos error names
its cause (400, 404 for what does not exist, 409 for a busy daemon); the
gate in front (metnos.adapters.daemon.auth) has already refused any request without
the token.
"""

from __future__ import annotations

import asyncio
import re
import signal
import threading
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from domain.errors import MetnosError
from domain.household import HOST
from metnos.services import inbox as the_inbox, mnestome as mnests, outgoing, queries, replay as replays, schedules as schedule_service, telling
from metnos.services.live import TurnNotRunning
from metnos.services.pending import AlreadyAnswered, PendingUnknown
from metnos.services.host import DaemonBusy, DaemonHost, DaemonStopping
from metnos.services.interrupts import InterruptGate
from metnos.services.queries import ExecutorNotFound, TurnNotFound, log_page
from metnos.services.schedules import SchedulerError

EVENT_POLL_S = 0.25
# How long an ask waits for the writer before it is answered 409: a scheduler tick's moment, not a turn.
ASK_WAIT_S = 2.0
# How often a running ask looks whether its client is still there.
DISCONNECT_POLL_S = 0.25


CONVERSATION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class BadRequest(MetnosError):
    """The request's body or parameters are not what the route takes."""


# A device that holds the token names itself in this header (a phone, a script); the dashboard's
# session, and a client that names nothing, is the device "dashboard". Each is paired once.
DEVICE_HEADER = "x-metnos-device"
DASHBOARD_DEVICE = "dashboard"
_DEVICE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
CHANNEL = "http"


def device_of(request: Request) -> str:
    device = request.headers.get(DEVICE_HEADER, DASHBOARD_DEVICE).strip()
    if not _DEVICE.match(device):
        raise BadRequest(f"{DEVICE_HEADER} must be 1-64 letters, digits, '.', '_' or '-', not {device[:80]!r}")
    return device


def json_response(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data, default=str), status_code=status, media_type="application/json")


def body_of(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise BadRequest(f"the body is not JSON: {e}") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    return data


def outcome_json(outcome: Any) -> dict[str, Any]:
    """A turn's outcome as ``metnos ask --json`` gives it (metnos/runtime/turn/telling.py); ``message`` says
    why an unverified answer is one, ``quarantined`` names what the request missed."""
    return telling.outcome_json(outcome)


def conversation_of(body: dict[str, Any]) -> tuple[str | None, bool]:
    """``"conversation": "NAME"`` (the dashboard sends its session's): the turn continues that conversation,
    or starts it anew with ``"new_conversation": true``; without it, a turn alone (docs/turns.md, "Conversations")."""
    name, fresh = body.get("conversation"), body.get("new_conversation", False)
    if name is not None and not (isinstance(name, str) and CONVERSATION_NAME.fullmatch(name)):
        raise BadRequest('"conversation" is a name of 1 to 64 letters, digits, "-" or "_", e.g. "dashboard"')
    if not isinstance(fresh, bool):
        raise BadRequest('"new_conversation" is true or false')
    if fresh and name is None:
        raise BadRequest('"new_conversation" needs the "conversation" it starts, e.g. {"conversation": "dashboard", "new_conversation": true}')
    return (None if name is None else f"http:{name}"), fresh


def routes(host: DaemonHost) -> list[Route]:
    # Each endpoint is a plain function: Starlette runs it in a worker thread,
    # so a turn that waits for an approval never blocks the answer to it.
    async def ask(request: Request) -> Response:
        try:
            body = body_of(await request.body())
            text = body.get("text")
            if not isinstance(text, str):
                raise BadRequest('give the request as {"text": "..."}')
            approve = body.get("approve", "ask")
            conversation, fresh = conversation_of(body)
            gone = threading.Event()
            if approve == "yes":
                approver = lambda *_: (True, "http:approve=yes")  # noqa: E731
            elif approve == "no":
                approver = lambda *_: (False, "http:approve=no")  # noqa: E731
            elif approve == "ask":
                approver = host.approvals.approver("http", gone=gone, request=text)
            else:
                raise BadRequest('"approve" is one of "ask" (wait for an answer at /api/approvals), "yes", "no"')
            gate = InterruptGate()
            device = device_of(request)
            # A question the turn asks (a missing target, where the user is) waits at /api/dialogs. A turn already
            # running is answered 409 at once (after a scheduler tick's moment), not queued behind it.
            work = asyncio.ensure_future(run_in_threadpool(
                lambda: host.ask(text, approver=approver, channel="http", asker=host.dialogs.asker("http", request=text, gone=gone), interrupts=gate,
                                 wait_s=ASK_WAIT_S, conversation=conversation, new_conversation=fresh,
                                 principal=host.pair(CHANNEL, device),
                                 # A schedule the turn makes waits at /api/approvals with its next firings, saved on a yes.
                                 confirm_schedules=True)))
            while not (await asyncio.wait({work}, timeout=DISCONNECT_POLL_S))[0]:
                if not gone.is_set() and await request.is_disconnected():
                    # Nobody is left to read the answer: refuse what waits for an approval and stop the turn at
                    # its next safe point (recorded as TurnInterrupted, SIGHUP: the client hung up).
                    gone.set()
                    gate.stop_at_next_checkpoint(signal.SIGHUP)
            outcome = work.result()
            # The turn's messages that did not go out yet (queued for a retry) or were given up, said.
            return json_response({**outcome_json(outcome), "outbox": outgoing.notice(host.outbox, outcome.turn_id)})
        except Exception as e:  # noqa: BLE001 - every error is an answer naming its cause, never a traceback
            return error_response(e)

    def turns(request: Request, body: dict[str, Any]) -> Response:
        limit = _int(request.query_params.get("limit", "50"), "limit", low=1)
        with host.reading() as rt:
            return json_response(queries.turn_rows(queries.turns_now(rt), limit))

    def turn(request: Request, body: dict[str, Any]) -> Response:
        with host.reading() as rt:
            turn_id = queries.find_turn(queries.turns_now(rt), request.path_params["turn_id"])
            return json_response({"turn_id": turn_id, "summary": queries.turns_now(rt)["turns"][turn_id], "events": queries.turn_events(rt, turn_id)})

    def live(request: Request, body: dict[str, Any]) -> Response:
        turn_id = host.live.find(request.path_params["turn_id"]) or request.path_params["turn_id"]
        return json_response(host.live.events(turn_id, _int(request.query_params.get("after", "0"), "after", low=0)))

    def stop(request: Request, body: dict[str, Any]) -> Response:
        turn_id = host.live.find(request.path_params["turn_id"]) or request.path_params["turn_id"]
        return json_response(host.stop_turn(turn_id, channel="http"), 202)

    def replay(request: Request, body: dict[str, Any]) -> Response:
        with host.reading() as rt:
            return json_response(replays.replay_one(rt, request.path_params["turn_id"]))

    def undo_plan(request: Request, body: dict[str, Any]) -> tuple[replays.Undoer, Any] | None:
        turn_ref = request.query_params.get("turn") or body.get("turn_id")
        if turn_ref is not None and not isinstance(turn_ref, str):
            raise BadRequest(f'"turn_id" is a turn\'s id as a string (or its start, as `metnos turns list` shows it), not {turn_ref!r}')
        with host.reading() as rt:
            turn_id = queries.find_turn(queries.turns_now(rt), turn_ref) if turn_ref else None
        return replays.undo_plan(host.runtime, turn_id)

    def undo_preview(request: Request, body: dict[str, Any]) -> Response:
        found = undo_plan(request, body)
        if found is None:
            return json_response({"status": "nothing", "message": "there is no turn left to undo"})
        undoer, plan = found
        return json_response({**undoer.preview(plan, force=request.query_params.get("force") == "1").to_json(), "dry_run": True})

    def undo(request: Request, body: dict[str, Any]) -> Response:
        # Every parameter checked first: a bad one is 400 whether or not there is a turn to undo.
        force = _flag(body, "force")
        with host.writing():
            found = undo_plan(request, body)
            if found is None:
                return json_response({"status": "nothing", "message": "there is no turn left to undo"})
            undoer, plan = found
            result = undoer.apply(plan, force=force)
        return json_response({**result.to_json(), "dry_run": False}, 200 if result.status == "undone" else 409)

    def approvals(request: Request, body: dict[str, Any]) -> Response:
        return json_response(host.approvals.pending())

    def answer(request: Request, body: dict[str, Any]) -> Response:
        approved = body.get("approve")
        if not isinstance(approved, bool):
            raise BadRequest('answer with {"approve": true} or {"approve": false}')
        # A device paired as a guest gives no approval, whichever turn asks.
        if host.approver_is_guest(CHANNEL, device_of(request)):
            raise GuestCannotApprove("this device is paired as a guest, and a guest gives no approval: "
                                     "answer from the host's device or chat")
        return json_response(host.approvals.answer(request.path_params["approval_id"], approved=approved, by="user"))

    def dialogs(request: Request, body: dict[str, Any]) -> Response:
        return json_response(host.dialogs.pending())

    def reply(request: Request, body: dict[str, Any]) -> Response:
        answer = body.get("answer")
        if not isinstance(answer, str):
            raise BadRequest('answer with {"answer": "..."}: the words the question asks for')
        return json_response(host.dialogs.answer(request.path_params["dialog_id"], answer, by="user", channel=CHANNEL))

    def inbox(request: Request, body: dict[str, Any]) -> Response:
        return json_response(the_inbox.items(host))

    def inbox_answer(request: Request, body: dict[str, Any]) -> Response:
        """One answer to an item of the inbox: ``{"approve": true|false}`` (an approval), ``{"answer": "..."}``
        (a question), ``{"action": "retry"|"dismiss"}`` (an undelivered message)."""
        item_id = request.path_params["item_id"]
        approve, text, action = body.get("approve"), body.get("answer"), body.get("action")
        if approve is not None and not isinstance(approve, bool):
            raise BadRequest('"approve" is true or false')
        if text is not None and not isinstance(text, str):
            raise BadRequest('"answer" is the words the question asks for, as a string')
        if action is not None and action not in ("retry", "dismiss"):
            raise BadRequest('"action" is "retry" or "dismiss"')
        # The command line answers through this API (`metnos inbox`): its answers are recorded as given on cli.
        via = body.get("via", CHANNEL)
        if via not in (CHANNEL, "cli"):
            raise BadRequest('"via" is "cli" (`metnos inbox`) or left out (http)')
        if approve is None and text is None and action is None:
            raise BadRequest('answer with {"approve": true|false} (an approval), {"answer": "..."} (a question) '
                             'or {"action": "retry"|"dismiss"} (an undelivered message)')
        if (approve is not None or action is not None) and host.approver_is_guest(CHANNEL, device_of(request)):
            raise GuestCannotApprove("this device is paired as a guest, and a guest answers nothing of the host's inbox: "
                                     "answer from the host's device or chat")
        return json_response(the_inbox.answer(host, item_id, channel=via, by="user", approve=approve, text=text, action=action))

    def schedules(request: Request, body: dict[str, Any]) -> Response:
        with host.reading() as rt:
            return json_response(schedule_service.rows(rt))

    def schedule_when(request: Request, body: dict[str, Any]) -> Response:
        words = request.query_params.get("words", "")
        with host.reading() as rt:
            return json_response(schedule_service.read_on(rt, words, request.query_params.get("timezone", "UTC"), models=host.model_for))

    def schedule_add(request: Request, body: dict[str, Any]) -> Response:
        """A schedule from words or cron: without ``"confirm": true`` only what it would be (the cron
        read and the next three firings) comes back, and nothing is created."""
        when, timezone = body.get("when"), body.get("timezone", "UTC")
        if not isinstance(when, str) or not when.strip():
            raise BadRequest('give the cadence: {"when": "every morning at 8", "executor": ..., "confirm": true}')
        if isinstance(body.get("executor"), str):
            target = {"kind": "executor", "name": body["executor"]}
        elif isinstance(body.get("chain"), list):
            target = {"kind": "chain", "steps": body["chain"]}
        else:
            raise BadRequest('give the target: "executor" (a name) or "chain" (a list of steps)')
        if body.get("confirm") is not True:
            with host.reading() as rt:
                return json_response({"created": False, **schedule_service.read_on(rt, when, timezone, models=host.model_for)})
        fields = {k: body[k] for k in ("args", "channel", "label", "count") if k in body}
        actor = host.pair(CHANNEL, device_of(request))
        with host.writing() as rt:
            # The authenticated host confirmed it: that is the approval a schedule with side effects needs
            # (a guest's device gives none: such a schedule is refused for it).
            made = schedule_service.add_on(rt, when=when, target=target, timezone=timezone,
                                           approved_by="http:user" if actor == HOST else None,
                                           models=host.model_for, actor=actor, **fields)
        return json_response({"created": True, **made})

    def schedule_command(request: Request, body: dict[str, Any]) -> Response:
        command = request.path_params["command"]
        with host.writing() as rt:
            if command not in schedule_service.COMMANDS:
                raise BadRequest(f"unknown schedule command {command!r}; one of {', '.join(schedule_service.COMMANDS)}")
            return json_response(schedule_service.command(rt, command, request.path_params["schedule_id"],
                                                          deliver=host.deliver_scheduled))

    def executors(request: Request, body: dict[str, Any]) -> Response:
        with host.reading() as rt:
            return json_response(queries.catalogue_rows(queries.catalogue_now(rt)))

    def executor(request: Request, body: dict[str, Any]) -> Response:
        name = request.path_params["name"]
        with host.reading() as rt:
            return json_response(queries.executor_detail(rt, name))

    def mnestome(request: Request, body: dict[str, Any]) -> Response:
        limit = _int(request.query_params.get("limit", "200"), "limit", low=1)
        with host.reading() as rt:
            rows = mnests.served(rt, limit)
        return json_response({"mnests": rows, "graph": queries.mnestome_graph(rows)})

    async def events(request: Request) -> Response:
        """A live stream (server-sent events) of the log from ``after`` (or Last-Event-ID) on."""
        try:
            start = _int(request.headers.get("last-event-id") or request.query_params.get("after", "0"), "after", low=0) + 1
        except BadRequest as e:
            return error_response(e)
        topic = request.query_params.get("topic", "")
        named = request.query_params.get("names", "1") != "0"
        return StreamingResponse(_event_stream(host, request, start, topic, named), media_type="text/event-stream",
                                 headers={"cache-control": "no-store", "x-accel-buffering": "no"})

    return [
        Route("/api/ask", ask, methods=["POST"]),
        Route("/api/turns", _handled(turns)),
        Route("/api/turns/{turn_id}", _handled(turn)),
        Route("/api/turns/{turn_id}/replay", _handled(replay), methods=["POST"]),
        Route("/api/turns/{turn_id}/live", _handled(live)),
        Route("/api/turns/{turn_id}/stop", _handled(stop), methods=["POST"]),
        Route("/api/undo", _handled(undo_preview), methods=["GET"]),
        Route("/api/undo", _handled(undo), methods=["POST"]),
        Route("/api/approvals", _handled(approvals)),
        Route("/api/approvals/{approval_id}", _handled(answer), methods=["POST"]),
        Route("/api/dialogs", _handled(dialogs)),
        Route("/api/dialogs/{dialog_id}", _handled(reply), methods=["POST"]),
        Route("/api/inbox", _handled(inbox)),
        Route("/api/inbox/{item_id}", _handled(inbox_answer), methods=["POST"]),
        Route("/api/schedules", _handled(schedules), methods=["GET"]),
        Route("/api/schedules", _handled(schedule_add), methods=["POST"]),
        Route("/api/schedules/when", _handled(schedule_when), methods=["GET"]),
        Route("/api/schedules/{schedule_id}/{command}", _handled(schedule_command), methods=["POST"]),
        Route("/api/executors", _handled(executors)),
        Route("/api/executors/{name}", _handled(executor)),
        Route("/api/mnestome", _handled(mnestome)),
        Route("/api/events", events),
    ]


def _int(text: str, name: str, *, low: int | None = None) -> int:
    try:
        number = int(text)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number, not {text!r}") from None
    if low is not None and number < low:
        raise BadRequest(f"{name} must be {low} or more, not {number}")
    return number


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise BadRequest(f'"{name}" is true or false, not {value!r}')
    return value


class GuestCannotApprove(MetnosError):
    """An approval answered from a device paired as a guest."""


def error_status(e: MetnosError) -> int:
    if isinstance(e, GuestCannotApprove):
        return 403
    if isinstance(e, (AlreadyAnswered, TurnNotRunning)):
        return 409
    if isinstance(e, (TurnNotFound, ExecutorNotFound, PendingUnknown)):
        return 404
    if isinstance(e, DaemonBusy):
        return 409
    if isinstance(e, DaemonStopping):
        return 503
    if isinstance(e, SchedulerError) and "no schedule" in str(e):
        return 404
    return 400


def error_response(e: BaseException) -> Response:
    if isinstance(e, MetnosError):
        return json_response({"error": {"kind": type(e).__name__, "message": str(e)}}, error_status(e))
    cause = " ".join(f"{type(e).__name__}: {e}".split())[:300]
    return json_response({"error": {"kind": "unexpected", "message": f"unexpected error: {cause} (a bug in Metnos)"}}, 500)


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route, a method a route does not take) as the API's JSON errors."""
    status = getattr(exc, "status_code", 500)
    if not request.url.path.startswith("/api/"):
        return PlainTextResponse(str(getattr(exc, "detail", "")), status_code=status, headers=getattr(exc, "headers", None))
    kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(status, "HTTPError")
    message = {404: f"no API route {request.url.path}; docs/daemon.md lists them",
               405: f"{request.method} is not taken by {request.url.path}"}.get(status, str(getattr(exc, "detail", "")))
    return Response(orjson.dumps({"error": {"kind": kind, "message": message}}), status_code=status, media_type="application/json",
                    headers=getattr(exc, "headers", None))


def _handled(endpoint: Any) -> Any:
    """Run ``endpoint(request, body)`` in a worker thread; its errors become JSON."""
    async def handle(request: Request) -> Response:
        try:
            body = body_of(await request.body()) if request.method == "POST" else {}
            return await run_in_threadpool(endpoint, request, body)
        except Exception as e:  # noqa: BLE001 - every error is an answer naming its cause, never a traceback
            return error_response(e)

    return handle


async def _event_stream(host: DaemonHost, request: Request, start: int, topic: str, named: bool) -> Any:
    def read(after: int) -> tuple[list[dict[str, Any]], int]:
        return log_page(host.runtime, after, topic)

    position = start
    yield b": metnos event stream\n\n"
    while not await request.is_disconnected():
        rows, moved_to = await run_in_threadpool(read, position)
        for row in rows:
            # Named by the event's type (``event: TurnStarted``) unless names=0: a browser's
            # EventSource hears only the names it listens for, so the dashboard takes plain messages.
            kind = f"event: {row['topic'].rsplit('.', 1)[-1]}\n" if named else ""
            yield f"id: {row['id']}\n{kind}data: ".encode() + orjson.dumps(row, default=str) + b"\n\n"
        if moved_to == position:
            await asyncio.sleep(EVENT_POLL_S)
        position = moved_to
