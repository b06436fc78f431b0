"""SIGTERM taken as Ctrl-C while a driver owns child processes."""

from __future__ import annotations

import os
import signal
import time

import pytest

from epochgc.wiring.interrupts import sigterm_as_interrupt


def _wait_for_signal() -> None:
    """Python runs a handler between bytecodes: give it a few."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        time.sleep(0.01)


def test_sigterm_inside_raises_keyboard_interrupt_and_a_second_is_ignored() -> None:
    before = signal.getsignal(signal.SIGTERM)
    cleaned_up = False
    with pytest.raises(KeyboardInterrupt, match="signal 15"), sigterm_as_interrupt():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            _wait_for_signal()
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # a second one, during the clean-up
            time.sleep(0.05)
            cleaned_up = True
    assert cleaned_up
    assert signal.getsignal(signal.SIGTERM) == before
