"""saintpipe.core.malloc: fixing glibc's thresholds applies where the C library is glibc."""

from __future__ import annotations

import platform

from saintpipe.core.malloc import tune_malloc


def test_tune_malloc_applies_on_glibc_and_says_so():
    assert tune_malloc() == (platform.libc_ver()[0] == "glibc")
