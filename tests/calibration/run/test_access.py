"""The calibrate-token gate (calibration.run.access): constant-time compare, free typos, doubling lockout per
client address, a rerun of the same wrong entry counted once."""

from __future__ import annotations

import pytest

from calibration.run.access import FREE_TOKEN_TRIES, LOCKOUT_MAX_S, LOCKOUT_S, TokenGate

RIGHT = "s3cret"


def test_the_right_token_is_allowed_and_a_wrong_one_is_not() -> None:
    gate = TokenGate()
    assert gate.check(client="a", given=RIGHT, configured=RIGHT, now=0.0).allowed
    wrong = gate.check(client="a", given="guess", configured=RIGHT, now=0.0)
    assert not wrong.allowed and wrong.wait_s == 0.0 and wrong.failed_digest


def test_typos_are_free_then_each_wrong_token_doubles_the_lockout_up_to_its_cap() -> None:
    gate = TokenGate()
    now = 0.0
    for i in range(FREE_TOKEN_TRIES - 1):
        gate.check(client="a", given=f"typo{i}", configured=RIGHT, now=now)
        assert gate.wait_s("a", now) == 0.0
    waits = []
    for i in range(8):
        v = gate.check(client="a", given=f"guess{i}", configured=RIGHT, now=now)
        assert v.wait_s == 0.0 and not v.allowed  # compared: the previous lockout had passed
        waits.append(gate.wait_s("a", now))
        now += waits[-1]
    assert waits == [30.0, 60.0, 120.0, 240.0, 480.0, 900.0, 900.0, 900.0]
    assert waits[0] == LOCKOUT_S and max(waits) == LOCKOUT_MAX_S


def test_a_locked_out_client_is_refused_even_with_the_right_token_and_others_are_not() -> None:
    gate = TokenGate()
    for i in range(FREE_TOKEN_TRIES):
        gate.check(client="a", given=f"guess{i}", configured=RIGHT, now=0.0)
    v = gate.check(client="a", given=RIGHT, configured=RIGHT, now=1.0)
    assert not v.allowed and v.wait_s == pytest.approx(LOCKOUT_S - 1.0)
    assert gate.check(client="b", given=RIGHT, configured=RIGHT, now=1.0).allowed
    after = gate.check(client="a", given=RIGHT, configured=RIGHT, now=LOCKOUT_S + 1.0)
    assert after.allowed
    # success clears the count: the next wrong token is a free typo again
    gate.check(client="a", given="typo", configured=RIGHT, now=LOCKOUT_S + 2.0)
    assert gate.wait_s("a", LOCKOUT_S + 2.0) == 0.0


def test_the_same_wrong_entry_seen_again_counts_once() -> None:
    gate = TokenGate()
    first = gate.check(client="a", given="guess", configured=RIGHT, now=0.0)
    for _ in range(10):  # reruns of the page with the same text in the box
        again = gate.check(client="a", given="guess", configured=RIGHT, last_failed_digest=first.failed_digest,
                           now=0.0)
        assert not again.allowed and again.failed_digest == first.failed_digest
    assert gate.wait_s("a", 0.0) == 0.0  # one failure, not eleven
