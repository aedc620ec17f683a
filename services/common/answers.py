"""Checking an answer's ``data`` against the model its contract gives it (services/*/contract.py)."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from services.common.codes import ResponseCode
from services.common.errors import RemoteError

M = TypeVar("M", bound=BaseModel)


def checked(model: type[M], data: Any, who: str) -> M:
    """``data`` as ``model``; an answer that breaks the contract is a RemoteError (SYSTEM_ERROR) naming ``who``
    answered and the first fields that are wrong, not a KeyError somewhere later."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problem = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'data'}: {e['msg']}" for e in exc.errors()[:3])
        raise RemoteError(int(ResponseCode.SYSTEM_ERROR),
                          f"{who}'s answer is malformed ({model.__name__}: {problem})") from None
