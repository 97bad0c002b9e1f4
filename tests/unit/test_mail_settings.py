"""[mail] in config.toml: accounts, recipients, and a password that never goes there."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from metnos.settings.mail import MailConfig


def test_an_account_becomes_what_the_executors_read_without_a_secret(tmp_path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
    conf = MailConfig.model_validate({"accounts": {"home": {"username": "anna@example.org", "imap_host": "imap.example.org",
                                                            "smtp_host": "smtp.example.org", "ca_file": str(ca),
                                                            "secret": "home-mail"}},
                                      "recipients": {"elena": "elena@example.org"}})
    out = conf.executor_config()["mail"]
    home = out["accounts"]["home"]
    assert (home["host"], home["port"], home["smtp_host"], home["smtp_port"]) == ("imap.example.org", 993, "smtp.example.org", 587)
    assert home["from_address"] == "anna@example.org" and home["ca_pem"].startswith("-----BEGIN")
    assert "secret" not in home and "password" not in home
    assert conf.secret_names() == {"home": "home-mail"} and out["recipients"] == {"elena": "elena@example.org"}


@pytest.mark.parametrize(("table", "said"), [
    ({"accounts": {"home": {"username": "a", "imap_host": "h", "password": "x"}}}, "never goes in config.toml"),
    ({"accounts": {"home": {"imap_host": "h"}}}, "username: required"),
    ({"accounts": {"home": {"username": "a"}}}, "imap_host"),
    ({"accounts": {"home": {"username": "a", "imap_host": "h", "tls": "none"}}}, "implicit"),
    ({"recipients": {"elena": "not an address"}}, "not an e-mail address"),
    ({"default_account": "work"}, "no [mail.accounts.work]"),
    ({"accounts": {"home": {"username": "a", "imap_host": "h", "ca_file": "/nonexistent.pem"}}}, "ca_file"),
])
def test_a_wrong_table_is_named(table: dict, said: str) -> None:
    with pytest.raises(ValidationError, match=said.replace("[", r"\[").replace(".", r"\.")):
        MailConfig.model_validate(table)
