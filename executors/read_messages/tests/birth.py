import json
import os
import socket


def _account(port, **extra):
    return {"mail": {"accounts": {"school": {"host": "127.0.0.1", "port": port, "tls": "implicit",
                                             "username": "carla", **extra}}}}


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def birth_no_account_says_how_to_add_one(run, tmp):
    out = run({"unread_only": True}, config={"mail": {"accounts": {}}})
    assert out["ok"] is False and out["error"]["class"] == "UnknownAccount", out
    assert "[mail.accounts.NAME]" in out["error"]["message"]
    out = run({"account": "work"}, config=_account(993))
    assert out["error"]["class"] == "UnknownAccount" and "school" in out["error"]["message"], out


def birth_never_in_clear(run, tmp):
    out = run({}, config=_account(143, tls="none"))
    assert out["error"]["class"] == "Tls" and "never goes in clear" in out["error"]["message"], out


def birth_no_password_names_account_and_fix(run, tmp):
    os.environ.pop("METNOS_MAIL_SECRETS", None)
    out = run({}, config=_account(_closed_port()))
    assert out["error"]["class"] == "Unauthorized", out
    assert "'school'" in out["error"]["message"] and "metnos mail password school" in out["error"]["message"]


def birth_unreachable_server_names_account(run, tmp):
    os.environ["METNOS_MAIL_SECRETS"] = json.dumps({"school": "birth-only"})
    try:
        port = _closed_port()
        out = run({"from": "school"}, config=_account(port, timeout_s=3))
    finally:
        os.environ.pop("METNOS_MAIL_SECRETS", None)
    assert out["error"]["class"] == "Network", out
    assert "'school'" in out["error"]["message"] and f"127.0.0.1:{port}" in out["error"]["message"]
    assert "birth-only" not in json.dumps(out)


def birth_bad_date_is_an_argument_error(run, tmp):
    # Dates are checked before any connection: nothing listens here either.
    os.environ["METNOS_MAIL_SECRETS"] = json.dumps({"school": "birth-only"})
    try:
        out = run({"since": "2026-13-45"}, config=_account(_closed_port(), timeout_s=3))
    finally:
        os.environ.pop("METNOS_MAIL_SECRETS", None)
    assert out["ok"] is False and out["error"]["class"] == "InvalidArgument", out
    assert "2026-13-45" in out["error"]["message"]
