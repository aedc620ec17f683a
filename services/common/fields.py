"""Validated field types for the services' HTTP request bodies and queries.

Every number that arrives from the network is a strict JSON integer (a boolean, a float or a numeric
string is refused) inside the range of the type RocketMQ gives it: broker ids are Java longs ≥ 1, epochs
Java ints ≥ 0, offsets Java longs ≥ -1 (-1 meaning "none yet"), queue ids Java ints ≥ 0. A value outside
is answered ``INVALID_PARAMETER`` with a remark naming the field (services/common/envelope.py), before any
code of the service sees it. Strings have a bounded length, and a request id a charset as well, because
request ids are replicated through Raft and remembered by every controller.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, StrictBool, StrictInt, StrictStr

JAVA_LONG_MAX = 2**63 - 1
JAVA_INT_MAX = 2**31 - 1
JAVA_INT_MIN = -(2**31)

#: The longest ``requestId`` accepted, and its characters (what uuids, our own ids and the documented
#: examples use; nothing that needs escaping in a log line or a URL).
REQUEST_ID_MAX_LENGTH = 128
REQUEST_ID_PATTERN = r"^[A-Za-z0-9._:-]+$"


def _not_zero(value: int) -> int:
    if value == 0:
        raise ValueError("broker id 0 does not exist: give -1 (none) or an id of at least 1")
    return value


BrokerId = Annotated[StrictInt, Field(ge=1, le=JAVA_LONG_MAX)]
#: A broker id where the API allows "none": -1, or an id ≥ 1.
BrokerIdOrNone = Annotated[StrictInt, Field(ge=-1, le=JAVA_LONG_MAX), AfterValidator(_not_zero)]
Epoch = Annotated[StrictInt, Field(ge=0, le=JAVA_INT_MAX)]
#: What a broker reports before it has any epoch: -1.
EpochOrNone = Annotated[StrictInt, Field(ge=-1, le=JAVA_INT_MAX)]
Offset = Annotated[StrictInt, Field(ge=-1, le=JAVA_LONG_MAX)]
JavaInt = Annotated[StrictInt, Field(ge=JAVA_INT_MIN, le=JAVA_INT_MAX)]
QueueId = Annotated[StrictInt, Field(ge=0, le=JAVA_INT_MAX)]
Flag = StrictBool
Name = Annotated[StrictStr, Field(min_length=1, max_length=255)]
OptionalName = Annotated[StrictStr, Field(max_length=255)]
RequestId = Annotated[StrictStr, Field(min_length=1, max_length=REQUEST_ID_MAX_LENGTH,
                                       pattern=REQUEST_ID_PATTERN)]
