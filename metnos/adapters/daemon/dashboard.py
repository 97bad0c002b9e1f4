"""The web dashboard: server-rendered pages (Jinja2) over the same services as the API.

Auth is the daemon's token: the login form posts it once and gets an
HttpOnly, SameSite=Strict cookie; any page without it is answered 401 with
that form (metnos.adapters.daemon.auth). The pages' few interactions (approve, undo,
replay, schedule commands, the live event list) are a small script shipped
in the package (static/dashboard.js) calling the JSON API; nothing is
fetched from elsewhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import orjson
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from metnos.adapters.daemon import pages
from metnos.adapters.daemon.api import error_response
from metnos.adapters.daemon.auth import COOKIE
from metnos.services.host import DaemonHost
from metnos.services.token import same_token

HERE = Path(__file__).parent
templates = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html", "jinja"]))


def render(template: str, **context: Any) -> str:
    return templates.get_template(template).render(**context)


def login_page(path: str = "/", error: str = "") -> bytes:
    return render("login.html.jinja", next=path if path.startswith("/") and not path.startswith("//") else "/", error=error).encode()


def error_page(error: Exception) -> Response:
    """The API's error (kind, message, status) as a page."""
    answer = error_response(error)
    message = orjson.loads(answer.body)["error"]["message"]
    return HTMLResponse(render("error.html.jinja", page="error", status=answer.status_code, message=message), status_code=answer.status_code)


def routes(host: DaemonHost, token: str) -> list[Any]:
    async def login(request: Request) -> Response:
        if request.method == "GET":
            return HTMLResponse(login_page(request.query_params.get("next", "/")))
        form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        target = form.get("next", "/")
        if not target.startswith("/") or target.startswith("//"):
            target = "/"
        if not same_token(form.get("token", "").strip(), token):
            return HTMLResponse(login_page(target, "that is not this daemon's token"), status_code=401)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return response

    async def logout(request: Request) -> Response:
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    def page(name: str, gather: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            try:
                context = await run_in_threadpool(gather, request)
                return HTMLResponse(render(name, page=name.split(".")[0], **context))
            except Exception as e:  # noqa: BLE001 - the page names the cause, never a traceback
                return error_page(e)

        return endpoint

    return [
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        *[Route(path, page(template, gather(host))) for path, template, gather in pages.PAGES],
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
