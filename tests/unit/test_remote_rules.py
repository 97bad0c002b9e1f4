from datetime import datetime, timedelta, timezone

import pytest

from domain.remote import (
    PAIRING_CODE_LIFETIME,
    IdempotencyRecord,
    PairingOffer,
    RemoteRefused,
    arguments_digest,
    check_drift,
    pairing_code_from,
)

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=timezone.utc)


def test_pairing_code_is_typeable_and_deterministic_from_entropy():
    code = pairing_code_from(bytes(range(8)))
    assert code == pairing_code_from(bytes(range(8)))
    assert len(code) == 8 and not set(code) & set("01OI")


def test_pairing_code_is_single_use():
    offer = PairingOffer.issue("ABCD2345", NOW)
    used = offer.redeem("abcd2345", NOW)
    assert used.used
    with pytest.raises(RemoteRefused) as refused:
        used.redeem("ABCD2345", NOW)
    assert refused.value.kind == "pairing-code-used"


def test_pairing_code_expires():
    offer = PairingOffer.issue("ABCD2345", NOW)
    offer.redeem("ABCD2345", NOW + PAIRING_CODE_LIFETIME)
    with pytest.raises(RemoteRefused) as refused:
        offer.redeem("ABCD2345", NOW + PAIRING_CODE_LIFETIME + timedelta(seconds=1))
    assert refused.value.kind == "pairing-code-expired"


def test_wrong_pairing_code_refused_and_code_not_stored_in_clear():
    offer = PairingOffer.issue("ABCD2345", NOW)
    assert "ABCD2345" not in repr(offer)
    with pytest.raises(RemoteRefused) as refused:
        offer.redeem("ABCD2346", NOW)
    assert refused.value.kind == "pairing-code-wrong"


def test_idempotency_record_replays_same_call_and_refuses_other_arguments():
    record = IdempotencyRecord("call-1", arguments_digest({"a": 1, "b": 2}), {"moved": 3})
    assert record.replay_for({"b": 2, "a": 1}) == {"moved": 3}
    with pytest.raises(RemoteRefused) as refused:
        record.replay_for({"a": 1, "b": 3})
    assert refused.value.kind == "idempotency-conflict"
    assert "new idempotency id" in str(refused.value)


def test_drift_check():
    check_drift("photo_organize", "ab" * 32, "ab" * 32)
    with pytest.raises(RemoteRefused) as drift:
        check_drift("photo_organize", "ab" * 32, "cd" * 32)
    assert drift.value.kind == "version-drift"
    with pytest.raises(RemoteRefused) as missing:
        check_drift("photo_organize", "ab" * 32, None)
    assert missing.value.kind == "executor-missing"


def test_a_pairing_answer_is_accepted_only_with_the_proof_of_the_code_it_was_made_for() -> None:
    from domain.remote import check_pairing_proof, pairing_proof

    payload = {"ca_pem": "CA", "certificate_pem": "CERT", "name": "laptop"}
    check_pairing_proof("abcd efgh", payload, pairing_proof("ABCD EFGH", payload))
    with pytest.raises(RemoteRefused) as other_code:
        check_pairing_proof("ABCDEFGJ", payload, pairing_proof("ABCDEFGH", payload))
    assert other_code.value.kind == "pairing-proof-wrong"
    with pytest.raises(RemoteRefused) as swapped_ca:  # someone in between sends their own CA
        check_pairing_proof("ABCDEFGH", {**payload, "ca_pem": "EVIL"}, pairing_proof("ABCDEFGH", payload))
    assert swapped_ca.value.kind == "pairing-proof-wrong"


@pytest.mark.parametrize("name", ["", "Laptop", "-nas", "a b", "x" * 64, "nas."])
def test_a_device_name_that_is_not_a_host_name_is_refused(name: str) -> None:
    from domain.remote import check_device_name

    with pytest.raises(RemoteRefused) as refused:
        check_device_name(name)
    assert refused.value.kind == "device-name-invalid"
    assert check_device_name("laptop-1") == "laptop-1"
