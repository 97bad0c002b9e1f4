import json
import os


def birth_outbox_by_default(run, tmp):
    out = run({"messages": [{"to_user": "lucia", "body": "Out for a bit, back at seven."},
                            {"to_user": "lucia", "body": "Bring bread."}]})
    assert out["ok"], out
    ids = [e["message_id"] for e in out["entries"]]
    assert len(set(ids)) == 2 and all(e["channel"] == "outbox" for e in out["entries"])
    files = sorted(os.listdir(tmp / "outbox"))
    assert files == sorted(i + ".json" for i in ids)
    bodies = {json.loads((tmp / "outbox" / f).read_text())["body"] for f in files}
    assert bodies == {"Out for a bit, back at seven.", "Bring bread."}


def birth_unknown_channel_and_recipient(run, tmp):
    os.environ.pop("METNOS_TELEGRAM_TOKEN", None)
    out = run({"messages": [{"to_user": "x", "body": "hi", "channel": "pigeon"},
                            {"to_user": "nobody", "body": "hi", "channel": "telegram"},
                            {"to_user": "12345", "body": "hi", "channel": "telegram"}]})
    classes = [e["error"]["class"] for e in out["entries"]]
    # The third has a chat id but no token: refused before any network.
    assert classes == ["UnknownChannel", "UnknownRecipient", "Unauthorized"], classes
    assert out["ok"] is False and out["metadata"]["fail_count"] == 3
    assert os.listdir(tmp / "outbox") == []


def birth_configured_default_channel(run, tmp):
    out = run({"messages": [{"to_user": "ann", "body": "x"}]},
              config={"messages": {"default_channel": "telegram"}, "telegram": {"chat_ids": {}}})
    assert out["entries"][0]["channel"] == "telegram"
    assert out["entries"][0]["error"]["class"] == "UnknownRecipient"


def birth_mail_says_which_account_recipient_or_password_is_missing(run, tmp):
    os.environ.pop("METNOS_MAIL_SECRETS", None)
    accounts = {"home": {"username": "carla@example.org", "smtp_host": "127.0.0.1", "smtp_port": 1}}
    out = run({"channel": "mail", "messages": [{"to_user": "bruno", "body": "hi"},
                                               {"to_user": "bruno@example.org", "body": "hi"}]},
              config={"mail": {"accounts": accounts, "recipients": {}}})
    first, second = (e["error"] for e in out["entries"])
    assert first["class"] == "UnknownRecipient" and "[mail.recipients]" in first["message"], first
    assert second["class"] == "Unauthorized" and "metnos mail password home" in second["message"], second
    out = run({"channel": "mail", "account": "work", "messages": [{"to_user": "a@b.org", "body": "hi"}]},
              config={"mail": {"accounts": accounts}})
    assert out["entries"][0]["error"]["class"] == "UnknownAccount" and "home" in out["entries"][0]["error"]["message"]
    assert os.listdir(tmp / "outbox") == []


def birth_mail_names_match_as_people_write_them(run, tmp):
    os.environ.pop("METNOS_MAIL_SECRETS", None)
    accounts = {"home": {"username": "carla@example.org", "smtp_host": "127.0.0.1", "smtp_port": 1}}
    out = run({"channel": "mail", "messages": [{"to_user": "Bruno", "body": "hi"}]},
              config={"mail": {"accounts": accounts, "recipients": {"bruno": "bruno@example.org"}}})
    # Found as bruno: what stops it is the missing password, not the recipient.
    assert out["entries"][0]["error"]["class"] == "Unauthorized", out
