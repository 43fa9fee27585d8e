"""connection.translate_error: a missing consumer group becomes one InvalidArgument naming the job and the group."""

from __future__ import annotations

import pytest
import redis

from saintpipe.core.errors import InvalidArgument, StateCorrupted
from saintpipe.services.pool.connection import translate_error

URL = "redis://:secret@localhost:6379/0"
STREAM = "saintpipe:pool:{cora-gcn}:stream"


@pytest.mark.parametrize(
    "reply",
    [
        # a stream command inside a pool script (Redis 6.2 and 7 word the script's error so)
        f"Error running script (call to f_2c39): @user_script:112: NOGROUP No such key '{STREAM}' or consumer "
        "group 'trial-3'",
        f"NOGROUP No such key '{STREAM}' or consumer group 'trial-3' in XREADGROUP with GROUP option",
        f"SAINTPIPE-NOGROUP trial-3 {STREAM}",  # job_keys.lua's no_group()
    ],
)
def test_a_missing_group_names_the_job_and_the_group(reply):
    error = translate_error(URL, redis.ResponseError(reply))
    assert isinstance(error, InvalidArgument)
    message = str(error)
    assert message.startswith("pool job cora-gcn: consumer group 'trial-3' does not exist"), message
    assert "removed (remove_group)" in message and "never added (add_group" in message and "\n" not in message


def test_other_replies_stay_as_they_were():
    outside = redis.ResponseError("NOGROUP No such key 'mystream' or consumer group 'g'")  # not a pool key
    assert translate_error(URL, outside) is outside
    blocked = redis.ResponseError("NOGROUP the consumer group this client was blocked on no longer exists")
    assert translate_error(URL, blocked) is blocked  # no names in it: the consumer's blocking read handles it
    wrong = translate_error(URL, redis.ResponseError(f"SAINTPIPE-WRONGTYPE string stream {STREAM}"))
    assert isinstance(wrong, StateCorrupted)
